"""The scheduler-side contract: which blocks are offloaded, and where to load or store them."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence
from typing import Protocol

from kvcontract.contracts.base import Contract
from kvcontract.contracts.keys import OffloadKey
from kvcontract.contracts.request import LookupResult, ReqContext
from kvcontract.contracts.specs import LoadStoreSpec
from kvcontract.contracts.values import ManagerStats, OffloadingEvent, PrepareStoreOutput

__all__ = ["OffloadingManager"]


class OffloadingManager(Contract, Protocol):
    """Tracks offloaded blocks for the scheduler and plans their loads and stores.

    Key parameters are ``Sequence`` where an implementation may need ``len()``,
    indexing or a second pass, and ``Iterable`` where one pass is enough.
    """

    @abstractmethod
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        """Whether ``key`` is offloaded and readable now."""

    @abstractmethod
    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> LoadStoreSpec:
        """Pin ``keys`` against eviction until ``complete_load``; the spec lists them in key order."""

    @abstractmethod
    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
        """Mark ``keys`` recently used, the first key most recently."""

    def complete_load(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        """Unpin ``keys`` once their load has finished."""
        return None

    @abstractmethod
    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        """Allocate blocks for the keys not yet stored, evicting if needed.

        Returns ``None`` when there is no room; never evicts a key of ``keys``.
        """

    def complete_store(self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool = True) -> None:
        """Make stored ``keys`` readable, or on failure free those not yet readable."""
        return None

    def on_request_finished(self, req_context: ReqContext) -> None:
        """The request will submit no more loads or stores."""
        return None

    def take_events(self) -> list[OffloadingEvent]:
        """Events since the last call, oldest first."""
        return []

    @abstractmethod
    def stats(self) -> ManagerStats:
        """Counters and gauges of this manager."""

    @abstractmethod
    def reset_cache(self) -> None:
        """Forget every readable block."""

    def shutdown(self) -> None:
        """Release resources; the manager is not used afterwards."""
        return None
