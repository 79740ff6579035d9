"""Capacities in offload blocks from vLLM's block bytes, shared by the spec and the tier adapter.

kvcontract's config turns sizes into blocks with its own ``kv_layout`` when it validates;
under vLLM the bytes of a block are vLLM's (they depend on the model and the parallel
layout), so a size given to the adapters is turned into blocks with those first, and the
config then validates plain block counts.
"""

from __future__ import annotations

from pydantic import ByteSize, TypeAdapter, ValidationError
from vllm.v1.kv_offload.config import OffloadingConfig

from kvcontract.config import ConfigLimits

__all__ = ["offload_block_bytes", "size_in_blocks"]

_SIZE = TypeAdapter(ByteSize)


def offload_block_bytes(config: OffloadingConfig) -> int:
    """Host bytes of one offload block over all workers, as vLLM sizes ``cpu_bytes_to_use``."""
    return config.worker_kv_bytes_per_block * config.cache.blocks_per_chunk * max(config.parallel.world_size, 1)


def size_in_blocks(value: object, block_bytes: int) -> object:
    """A size string (``"16GiB"``) as offload blocks of ``block_bytes``; anything else as it is, for the config to check.

    Raises ``ValueError`` saying why when the size is not understood or holds no block.
    """
    if not isinstance(value, str):
        return value
    try:
        size = _SIZE.validate_python(value)
    except ValidationError:
        raise ValueError(f"{value!r} is not a size such as '16GiB'") from None
    if block_bytes < 1:
        raise ValueError("vLLM reported no KV bytes per block; give the capacity in blocks, not a size")
    blocks = size // block_bytes
    if blocks < 1:
        raise ValueError(f"{size.human_readable()} holds no offload block of {block_bytes} bytes")
    if blocks > ConfigLimits.MAX_CAPACITY_BLOCKS:
        raise ValueError(
            f"{value} is {blocks} offload blocks of {block_bytes} bytes, more than the "
            f"limit of {ConfigLimits.MAX_CAPACITY_BLOCKS} blocks"
        )
    return blocks
