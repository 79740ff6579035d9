"""One contract implementation per kvcontract-lint rule, each breaking that rule once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from typing_extensions import override

from kvcontract import (
    LoadStoreSpec,
    LookupResult,
    ManagerStats,
    OffloadingManager,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
)
from not_installed_anywhere import MysteryBase


class Base(OffloadingManager):
    """A complete manager the cases below derive from."""

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        return LookupResult.MISS

    @override
    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> LoadStoreSpec:
        raise NotImplementedError

    @override
    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
        return None

    @override
    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        return None

    @override
    def stats(self) -> ManagerStats:
        return ManagerStats(capacity=0, used=0)

    @override
    def reset_cache(self) -> None:
        return None


class MissingOverride(Base):
    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
        return None


class OverrideWithoutBase(Base):
    @override
    def prefetch(self, keys: Sequence[OffloadKey]) -> None:
        return None


class NarrowedSignature(Base):
    @override
    def touch(self, keys: list[OffloadKey], req_context: ReqContext) -> None:
        return None


class RedundantCopy(Base):
    @override
    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        for key in list(keys):
            req_context.set_state(key)
        return None


class IterableReused(Base):
    @override
    def complete_store(self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool = True) -> None:
        if len(keys) == 0:
            return None
        return None


class Unannotated(Base):
    @override
    def lookup(self, key, req_context):
        return LookupResult.MISS


class UnknownBase(MysteryBase):
    def lookup(self) -> None:
        return None
