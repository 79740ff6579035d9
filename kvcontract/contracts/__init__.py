"""The contracts of kvcontract: Protocols and the value types they exchange.

Every implementer is checked by the runtime enforcement (:mod:`.enforcement`) from its
creation on: :class:`~.base.Contract` calls it, so importing this package registers nothing.
"""

from kvcontract.contracts.base import Contract
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
