"""The contracts of kvcontract: Protocols and the value types they exchange.

Importing the package registers the runtime enforcement (:mod:`.enforcement`) with
:mod:`.base`, so every implementer is checked from its creation on.
"""

from kvcontract.contracts.base import Contract
from kvcontract.contracts.base import register_enforcer as _register_enforcer
from kvcontract.contracts.enforcement.classes import enforce_class as _enforce_class
from kvcontract.contracts.identity import BlockIdentity
from kvcontract.contracts.keys import (
    OffloadKey,
    make_offload_key,
    offload_key_group,
    offload_key_hash,
)
from kvcontract.contracts.manager import OffloadingManager
from kvcontract.contracts.policy import CachePolicy
from kvcontract.contracts.request import LookupResult, ReqContext
from kvcontract.contracts.specs import BlockIdsSpec, GPULoadStoreSpec, LoadStoreSpec
from kvcontract.contracts.tier import SecondaryTier, TierJob
from kvcontract.contracts.values import (
    BlockStatus,
    ManagerStats,
    OffloadingEvent,
    PrepareStoreOutput,
    TransferResult,
)
from kvcontract.contracts.worker import OffloadingWorker

_register_enforcer(_enforce_class)

__all__ = [
    "BlockIdentity",
    "BlockIdsSpec",
    "BlockStatus",
    "CachePolicy",
    "Contract",
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
