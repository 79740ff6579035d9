"""Overrides that narrow a contract's parameter: the type checkers refuse each, as class creation and KVC003 do.

``tests/contracts/test_override_signatures.py`` creates every class here and asks the lint
about this file: the three guards must name the same overrides.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from typing_extensions import override

from kvcontract import BlockIdsSpec, OffloadKey, ReqContext
from kvcontract.policies import LRUPolicy
from kvcontract.tiers import FileTier
from kvcontract.transfer import TorchOffloadingWorker
from typecheck.fail._fixtures import GoodManager


class ListTouchPolicy(LRUPolicy):
    @override
    def touch(self, keys: list[OffloadKey]) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        keys.sort()


class ListPrepareStore(GoodManager):
    @override
    def prepare_store(self, keys: list[OffloadKey], req_context: ReqContext) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class TuplePrepareLoad(GoodManager):
    @override
    def prepare_load(self, keys: tuple[OffloadKey, ...], req_context: ReqContext) -> BlockIdsSpec:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return BlockIdsSpec(range(len(keys)))


class SequenceCompleteLoad(GoodManager):
    @override
    def complete_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class CollectionCompleteStore(GoodManager):
    @override
    def complete_store(self, keys: Collection[OffloadKey], req_context: ReqContext, success: bool = True) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class ListTouchTier(FileTier):
    @override
    def touch(self, keys: list[OffloadKey]) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class ListWaitWorker(TorchOffloadingWorker):
    @override
    def wait(self, job_ids: list[int]) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class WiderIsFine(GoodManager):
    """Not a failure: wider parameters keep the contract (here to show the three guards agree on it too)."""

    @override
    def touch(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        return None
