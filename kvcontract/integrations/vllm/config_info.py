"""What kvcontract's spec and tier publish on vLLM's info metric ``vllm:kv_offload_config_info``.

vLLM's CPU spec labels that series with the size of its host tier (``cpu_num_chunks``,
``cpu_blocks_per_chunk``, ``cpu_kv_cache_size_bytes``, ``cpu_kv_cache_size_tokens``); a
kvcontract spec fills the same labels, so a dashboard built for vLLM's CPU offloading reads
the same, and adds what only kvcontract configures: the manager, its policy, reuse
admission and the tiers below it. A kvcontract tier under vLLM's own tiering spec labels its
series with its kind and capacity. The values are fixed when they are made, as vLLM asks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from vllm.v1.kv_offload.config import OffloadingConfig

from kvcontract.config import CPUManagerConfig, FileTierConfig, KVContractConfig
from kvcontract.config.tiers import TierConfig
from kvcontract.integrations.vllm.capacity import offload_block_bytes
from kvcontract.integrations.vllm.releases import ConfigInfo, CPUOffloadingInfo

__all__ = ["KVContractOffloadingInfo", "KVContractTierInfo"]


@dataclass(frozen=True)
class KVContractOffloadingInfo(CPUOffloadingInfo):
    """vLLM's facts of the host tier, then kvcontract's shape of the manager behind it."""

    kvcontract_manager: str
    """``cpu``, or ``tiering`` when tiers sit below host memory."""
    kvcontract_policy: str
    """The host memory's eviction policy, as the config names it (``arc``, ``module:Class``)."""
    kvcontract_admission: str
    """``none``, or ``reuse`` with its store threshold (``reuse:2``)."""
    kvcontract_tiers: str
    """The secondary tiers in lookup order (``file,redis``), or ``none``."""

    @classmethod
    def describe(cls, config: OffloadingConfig, kvcontract: KVContractConfig) -> KVContractOffloadingInfo:
        """The labels for the spec that vLLM's ``config`` and the checked ``kvcontract`` config make."""
        manager, primary = kvcontract.manager, kvcontract.primary
        chunk_bytes = offload_block_bytes(config)
        host = CPUOffloadingInfo.from_config(config, kvcontract.host_blocks, chunk_bytes)
        tiers = [] if isinstance(manager, CPUManagerConfig) else [tier.kind for tier in manager.secondary]
        admission = primary.admission
        return cls(
            **asdict(host),
            kvcontract_manager=manager.kind,
            kvcontract_policy=primary.policy.kind,
            kvcontract_admission="none" if admission is None else f"reuse:{admission.store_threshold}",
            kvcontract_tiers=",".join(tiers) or "none",
        )


@dataclass(frozen=True)
class KVContractTierInfo(ConfigInfo):
    """A kvcontract tier's series under vLLM's ``TieringOffloadingSpec`` (vLLM adds the tier's name)."""

    kvcontract_tier: str
    """The tier's kind: ``file`` or ``redis``."""
    kvcontract_tier_capacity_blocks: int | None
    """Offload blocks the tier keeps; ``None`` for Redis, whose server owns its capacity."""

    @classmethod
    def describe(cls, tier: TierConfig, kvcontract: KVContractConfig) -> KVContractTierInfo:
        """The labels of the tier ``tier`` configures, its capacity in ``kvcontract``'s blocks."""
        capacity = tier.capacity if isinstance(tier, FileTierConfig) else None
        return cls(kvcontract_tier=tier.kind, kvcontract_tier_capacity_blocks=capacity)
