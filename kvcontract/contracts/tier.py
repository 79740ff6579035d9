"""The secondary-tier contract: storage below host memory (disk, remote...)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kvcontract.contracts.base import Contract
from kvcontract.contracts.keys import OffloadKey
from kvcontract.contracts.request import LookupResult
from kvcontract.contracts.specs import check_integers
from kvcontract.contracts.values import OffloadingEvent, TransferResult

__all__ = ["SecondaryTier", "TierJob"]


@dataclass(frozen=True, slots=True)
class TierJob:
    """A transfer between a tier and host memory: ``keys[i]`` to or from host block ``host_block_ids[i]``.

    The host block ids are checked here, once: non-negative integers, one per key. A tier
    still bounds them by its host buffer's rows.
    """

    job_id: int
    keys: Sequence[OffloadKey]
    host_block_ids: Sequence[int]

    def __post_init__(self) -> None:
        check_integers(self.host_block_ids, f"TierJob {self.job_id}: host_block_ids")
        if len(self.keys) != len(self.host_block_ids):
            raise ValueError(
                f"TierJob {self.job_id}: {len(self.keys)} keys but "
                f"{len(self.host_block_ids)} host_block_ids; give one host block per key"
            )


class SecondaryTier(Contract, Protocol):
    """A tier below host memory; never blocks the scheduler."""

    @abstractmethod
    def lookup(self, key: OffloadKey) -> LookupResult:
        """Whether ``key`` is stored in this tier and readable."""

    @abstractmethod
    def submit_store(self, job: TierJob) -> bool:
        """Start writing host blocks to this tier; ``False`` if it cannot start."""

    @abstractmethod
    def submit_load(self, job: TierJob) -> bool:
        """Start reading blocks of this tier into host blocks; ``False`` if it cannot start."""

    @abstractmethod
    def get_finished(self) -> list[TransferResult]:
        """Jobs finished since the last call, each reported once."""

    def touch(self, keys: Sequence[OffloadKey]) -> None:
        """Mark ``keys`` recently used, the first key most recently."""
        return None

    def take_events(self) -> list[OffloadingEvent]:
        """Blocks this tier gained or lost (evicted, found corrupt) since the last call."""
        return []

    def shutdown(self) -> None:
        """Finish in-flight jobs and release resources."""
        return None
