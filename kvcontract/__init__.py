"""kvcontract: KV-cache offloading for LLM inference engines, with checked contracts."""

from kvcontract.contracts import (
    BlockIdentity,
    BlockIdsSpec,
    BlockStatus,
    CachePolicy,
    Contract,
    GPULoadStoreSpec,
    LoadStoreSpec,
    LookupResult,
    ManagerStats,
    OffloadingEvent,
    OffloadingManager,
    OffloadingWorker,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
    SecondaryTier,
    TierJob,
    TransferResult,
    make_offload_key,
    offload_key_group,
    offload_key_hash,
)
from kvcontract.enforce import ContractDefinitionError, ContractViolation

__version__ = "0.1.0"

__all__ = [
    "BlockIdentity",
    "BlockIdsSpec",
    "BlockStatus",
    "CachePolicy",
    "Contract",
    "ContractDefinitionError",
    "ContractViolation",
    "GPULoadStoreSpec",
    "LoadStoreSpec",
    "LookupResult",
    "ManagerStats",
    "OffloadKey",
    "OffloadingEvent",
    "OffloadingManager",
    "OffloadingWorker",
    "PrepareStoreOutput",
    "ReqContext",
    "SecondaryTier",
    "TierJob",
    "TransferResult",
    "make_offload_key",
    "offload_key_group",
    "offload_key_hash",
]
