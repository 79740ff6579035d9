"""Assembly: the managers, tiers and worker a validated :class:`KVContractConfig` describes.

Kept apart from ``config.py`` so that the schema imports no component: loading and
validating a config never imports torch's copy engine or the tiers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from kvcontract.config import (
    ConfigError,
    CPUManagerConfig,
    FileTierConfig,
    KVContractConfig,
    MooncakeTierConfig,
    RedisTierConfig,
    TieringManagerConfig,
)
from kvcontract.contracts.identity import BlockIdentity
from kvcontract.contracts.manager import OffloadingManager
from kvcontract.contracts.tier import SecondaryTier
from kvcontract.enforce import configure
from kvcontract.managers import CPUOffloadingManager, FilterReusedOffloadingManager, TieringOffloadingManager
from kvcontract.tiers import FileTier, MooncakeTier, RedisTier
from kvcontract.tiers.integrity import read_integrity_key, read_secret_file
from kvcontract.tiers.redis.client import RedisAccess
from kvcontract.tiers.remote_tier import RemoteTierLimits
from kvcontract.transfer import HostBuffer, TorchOffloadingWorker

__all__ = ["apply_runtime_checks", "build_manager", "build_tier", "build_worker"]


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
        built = TieringOffloadingManager(built, tiers)
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


def build_tier(
    tier: FileTierConfig | RedisTierConfig | MooncakeTierConfig,
    config: KVContractConfig,
    host_blocks: torch.Tensor,
    *,
    identity: BlockIdentity | None = None,
) -> SecondaryTier:
    """The secondary tier ``tier`` describes, moving blocks of ``identity`` (by default
    ``config.block_identity()``) in and out of ``host_blocks``."""
    block_identity = identity if identity is not None else config.block_identity()
    if isinstance(tier, RedisTierConfig):
        return _build_redis(tier, block_identity, host_blocks)
    if isinstance(tier, MooncakeTierConfig):
        return _build_mooncake(tier, block_identity, host_blocks)
    return FileTier(
        tier.path,
        tier.capacity,
        host_blocks,
        identity=block_identity,
        policy=tier.policy.kind,
        io_threads=tier.io_threads,
        umask=tier.umask,
        trust_shared_root=tier.trust_shared_root,
        enable_events=tier.enable_events,
        integrity_key=_integrity_key(tier.integrity_key_file),
    )


def _integrity_key(path: Path | None) -> bytes | None:
    """The integrity key in ``path`` (its owner and mode checked), or ``None`` when the config names no key file."""
    return None if path is None else read_integrity_key(path)


def _limits(tier: RedisTierConfig | MooncakeTierConfig) -> RemoteTierLimits:
    """What a remote tier keeps and how long its jobs may take, as ``tier`` sets them."""
    return RemoteTierLimits(
        job_deadline=tier.job_deadline, known_keys=tier.known_keys, enable_events=tier.enable_events
    )


def _redis_access(tier: RedisTierConfig) -> RedisAccess:
    """The ACL login and TLS of ``tier``, its password read from ``password_file`` (owner and mode checked)."""
    password = None
    if tier.password_file is not None:
        password = read_secret_file(tier.password_file, "password_file").decode().rstrip("\r\n")
    return RedisAccess(
        username=tier.username,
        password=password,
        tls=tier.tls,
        tls_ca_file=tier.tls_ca_file,
        tls_cert_file=tier.tls_cert_file,
        tls_key_file=tier.tls_key_file,
        tls_check_hostname=tier.tls_check_hostname,
    )


def _build_redis(tier: RedisTierConfig, identity: BlockIdentity, host_blocks: torch.Tensor) -> RedisTier:
    nodes = [(host, int(port)) for host, _, port in (node.rpartition(":") for node in tier.cluster_nodes)]
    return RedisTier(
        host_blocks,
        identity=identity,
        url=tier.url,
        cluster_nodes=nodes,
        namespace=tier.namespace,
        socket_timeout=tier.socket_timeout,
        connect_timeout=tier.connect_timeout,
        pool_size=tier.pool_size,
        ttl_seconds=tier.ttl_seconds,
        io_threads=tier.io_threads,
        lookup_timeout=tier.lookup_timeout,
        retry_interval=tier.retry_interval,
        start_degraded=tier.start_degraded,
        integrity_key=_integrity_key(tier.integrity_key_file),
        access=_redis_access(tier),
        limits=_limits(tier),
    )


def _build_mooncake(tier: MooncakeTierConfig, identity: BlockIdentity, host_blocks: torch.Tensor) -> MooncakeTier:
    return MooncakeTier(
        host_blocks,
        identity=identity,
        master=tier.master,
        metadata_server=tier.metadata_server,
        protocol=tier.protocol,
        devices=tier.devices,
        local_hostname=tier.local_hostname,
        global_segment_size=tier.global_segment_size,
        local_buffer_size=tier.local_buffer_size,
        replicas=tier.replicas,
        timeout=tier.timeout,
        client_log_level=tier.client_log_level,
        io_threads=tier.io_threads,
        namespace=tier.namespace,
        lookup_timeout=tier.lookup_timeout,
        retry_interval=tier.retry_interval,
        start_degraded=tier.start_degraded,
        integrity_key=_integrity_key(tier.integrity_key_file),
        limits=_limits(tier),
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
