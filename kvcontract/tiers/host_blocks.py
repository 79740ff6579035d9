"""The checks every tier makes of the host memory it moves blocks in and out of: once at
construction for the buffer, once per job for the ids, before any byte moves."""

from __future__ import annotations

import torch

from kvcontract.contracts import BlockIdentity, TierJob

__all__ = ["check_host_block_ids", "check_host_blocks", "check_identity_block_bytes"]


def check_host_blocks(host_blocks: torch.Tensor, tier: str) -> None:
    """Refuse a buffer that is not a 2-D uint8 CPU tensor of contiguous rows, naming ``tier``."""
    if (
        host_blocks.dim() != 2
        or host_blocks.dtype != torch.uint8
        or host_blocks.device.type != "cpu"
        or host_blocks.stride(1) != 1
    ):
        raise ValueError(
            f"{tier} host_blocks must be a 2-D torch.uint8 CPU tensor "
            "(num_host_blocks, bytes_per_block) with contiguous rows; got "
            f"shape {tuple(host_blocks.shape)}, dtype {host_blocks.dtype}, "
            f"device {host_blocks.device}, strides {host_blocks.stride()}"
        )


def check_host_block_ids(job: TierJob, host_blocks: torch.Tensor, tier: str) -> None:
    """Refuse a job naming host blocks outside ``host_blocks`` (``TierJob`` already refused negatives)."""
    count = int(host_blocks.shape[0])
    bad = [i for i in job.host_block_ids if not 0 <= i < count]
    if bad:
        raise ValueError(
            f"TierJob {job.job_id}: host block ids {bad[:8]} are outside [0, {count}); "
            f"the host buffer given to {tier} has {count} blocks"
        )


def check_identity_block_bytes(identity: BlockIdentity, host_blocks: torch.Tensor, tier: str) -> None:
    """Refuse host blocks whose rows are not the identity's block size: the identity would describe other bytes."""
    width = int(host_blocks.shape[1])
    if identity.block_bytes != width:
        raise ValueError(
            f"{tier}: the block identity says blocks of {identity.block_bytes} bytes, but the host blocks "
            f"hold {width} bytes each: build the identity from the layout the host memory was sized for"
        )
