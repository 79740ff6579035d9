"""Implementers that break a contract's definition."""

from __future__ import annotations

from collections.abc import Sequence

from typing_extensions import override

from kvcontract import BlockIdsSpec, OffloadKey, ReqContext
from typecheck.fail._fixtures import GoodManager


class MissingOverride(GoodManager):
    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:  # type: ignore[explicit-override]  # pyright: ignore[reportImplicitOverride]
        return None


class OverrideWithoutBase(GoodManager):
    @override
    def prefetch(self, keys: Sequence[OffloadKey]) -> None:  # type: ignore[misc]  # pyright: ignore[reportGeneralTypeIssues]
        return None


class NarrowedParameter(GoodManager):
    @override
    def touch(self, keys: list[OffloadKey], req_context: ReqContext) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class WrongLookupReturn(GoodManager):
    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> str:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return "hit"


class WidenedReturn(GoodManager):
    @override
    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> BlockIdsSpec | None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class RemovedParameter(GoodManager):
    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return None
