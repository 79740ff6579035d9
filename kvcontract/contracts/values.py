"""Values exchanged through the contracts: block state, store plans, events, transfer results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvcontract.contracts.keys import OffloadKey
from kvcontract.contracts.specs import LoadStoreSpec

__all__ = [
    "BlockStatus",
    "ManagerStats",
    "OffloadingEvent",
    "PrepareStoreOutput",
    "TransferResult",
]


@dataclass(slots=True, eq=False)
class BlockStatus:
    """One block held by a policy: where it lives and how many loads read it.

    ``ref_cnt`` is -1 while its store is in flight (not readable), 0 when readable and
    evictable, and the number of loads in flight otherwise (pinned).
    """

    block_id: int
    ref_cnt: int = -1

    @property
    def is_ready(self) -> bool:
        """Whether the block's data has landed and can be loaded."""
        return self.ref_cnt >= 0


@dataclass(frozen=True, slots=True)
class PrepareStoreOutput:
    """What ``prepare_store`` decided: keys to write, where, and what it evicted for them."""

    keys_to_store: Sequence[OffloadKey]
    store_spec: LoadStoreSpec
    evicted_keys: Sequence[OffloadKey]


@dataclass(frozen=True, slots=True)
class OffloadingEvent:
    """Blocks that became readable (``removed=False``) or were dropped from ``medium``."""

    keys: Sequence[OffloadKey]
    medium: str
    removed: bool


@dataclass(frozen=True, slots=True)
class TransferResult:
    """Outcome of one finished transfer job."""

    job_id: int
    success: bool
    transfer_bytes: int = 0
    transfer_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class ManagerStats:
    """Counters (since creation) and gauges (now) of a manager, in offload blocks."""

    capacity: int
    used: int
    hits: int = 0
    misses: int = 0
    stored: int = 0
    loaded: int = 0
    evicted: int = 0
    failed_stores: int = 0
    """Blocks not stored: no room for them, or their store failed."""
    storing: int = 0
    """Blocks whose store is in flight now (not readable yet, not evictable)."""
    reading: int = 0
    """Blocks pinned by loads in flight now (each counted once however many loads read it)."""
    skipped_stores: int = 0
    """Blocks offered for storing that reuse admission kept out (not offered often enough yet)."""

    @property
    def hit_ratio(self) -> float:
        """Hits over lookups, 0.0 before the first lookup."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0
