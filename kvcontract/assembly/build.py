"""The manager tree and the worker a validated :class:`KVContractConfig` describes, and the runtime checks it switches."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kvcontract.assembly.tiers import build_tier
from kvcontract.config import (
    ConfigError,
    CPUManagerConfig,
    KVContractConfig,
    TieringManagerConfig,
)
from kvcontract.contracts.identity import BlockIdentity
from kvcontract.contracts.manager import OffloadingManager
from kvcontract.enforce import configure
from kvcontract.managers import CPUOffloadingManager, FilterReusedOffloadingManager, TieringOffloadingManager
from kvcontract.transfer import HostBuffer, TorchOffloadingWorker

__all__ = ["apply_runtime_checks", "build_manager", "build_worker"]


def apply_runtime_checks(config: KVContractConfig) -> None:
    """Switch the process's contract call checks as ``config.runtime_checks`` says.

    The entry points call it once (the command line, vLLM's spec); building a
    component never switches them, so two configs built in one process cannot undo each other.
    """
    configure(checks=config.runtime_checks)


def build_manager(
    config: KVContractConfig, *, host_blocks: torch.Tensor | None = None, identity: BlockIdentity | None = None
) -> OffloadingManager:
    """The manager tree ``config.manager`` describes.

    Its tiers keep blocks of ``identity`` (by default ``config.block_identity()``; engine
    adapters pass the one they derive from the engine's own config).

    Tiers move bytes between host memory and their storage, so a tiering manager needs the
    worker's host blocks: ``host_blocks`` (``TorchOffloadingWorker.host_buffer`` in the same
    process), or else the shared-memory file ``transfer.shared_memory_path`` is mapped.
    Either must hold every block the primary can address (its capacity, in rows of the
    layout's offload block bytes), or the config is refused here rather than at the first
    cascade. Reuse admission wraps the whole tree, so promotions from a tier are never filtered.
    """
    manager, primary = config.manager, config.primary
    built: OffloadingManager = _build_cpu(primary, config)
    if isinstance(manager, TieringManagerConfig):
        host = host_blocks if host_blocks is not None else _shared_host_blocks(config)
        _check_host_blocks(host, config)
        tiers = [build_tier(tier, config, host, identity=identity) for tier in manager.secondary]
        built = TieringOffloadingManager(built, tiers, cascade_share=manager.cascade_share)
    if primary.admission is not None:
        built = FilterReusedOffloadingManager(
            built,
            store_threshold=primary.admission.store_threshold,
            max_tracker_size=primary.admission.max_tracker_size,
        )
    return built


def _build_cpu(manager: CPUManagerConfig, config: KVContractConfig) -> OffloadingManager:
    return CPUOffloadingManager(
        manager.capacity,
        manager.policy.kind,
        enable_events=manager.enable_events,
    )


def _shared_host_blocks(config: KVContractConfig) -> torch.Tensor:
    path = config.transfer.shared_memory_path
    if path is None:
        raise ConfigError(
            "config",
            [
                "manager: a tiering manager needs the worker's host memory: pass "
                "build_manager(config, host_blocks=worker.host_buffer) or set "
                "transfer.shared_memory_path"
            ],
        )
    try:
        return HostBuffer(
            config.host_blocks, config.kv_layout.offload_block_bytes, pin=False, shared_memory_path=path
        ).tensor
    except (ValueError, OSError) as error:
        raise ConfigError("config", [f"transfer.shared_memory_path: {error}"]) from error


def _check_host_blocks(host: torch.Tensor, config: KVContractConfig) -> None:
    """Refuse host blocks the primary's block ids could run past, or whose rows are not one block each."""
    rows, width = config.host_blocks, config.kv_layout.offload_block_bytes
    if host.dtype != torch.uint8 or host.dim() != 2 or host.shape[0] < rows or host.shape[1] != width:
        raise ConfigError(
            "config",
            [
                f"host_blocks: the tiers address {rows} host blocks of {width} bytes (the primary's "
                f"capacity in offload blocks of kv_layout), but the buffer given is "
                f"{tuple(host.shape)} {host.dtype}: pass the host_buffer of a worker built from this "
                "config (build_worker), or a shared-memory file of that size"
            ],
        )


def build_worker(
    config: KVContractConfig, kv_caches: Sequence[torch.Tensor] | Sequence[Sequence[torch.Tensor]]
) -> TorchOffloadingWorker:
    """A torch worker over ``kv_caches`` with host memory for the primary manager's capacity."""
    pinned = config.transfer.pinned
    return TorchOffloadingWorker(
        kv_caches,
        num_host_blocks=config.host_blocks,
        blocks_per_offload_block=config.kv_layout.blocks_per_offload_block,
        pin_memory=None if pinned == "auto" else pinned,
        shared_memory_path=config.transfer.shared_memory_path,
    )
