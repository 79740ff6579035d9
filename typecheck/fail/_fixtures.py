"""Shared objects for the fail cases: a complete manager and a key."""

from __future__ import annotations

from collections.abc import Sequence

from typing_extensions import override

from kvcontract import (
    BlockIdsSpec,
    LookupResult,
    ManagerStats,
    OffloadingManager,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
    make_offload_key,
)


class GoodManager(OffloadingManager):
    """A minimal manager that keeps every contract."""

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        return LookupResult.MISS

    @override
    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> BlockIdsSpec:
        return BlockIdsSpec(range(len(keys)))

    @override
    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
        return None

    @override
    def prepare_store(
        self, keys: Sequence[OffloadKey], req_context: ReqContext
    ) -> PrepareStoreOutput | None:
        return None

    @override
    def stats(self) -> ManagerStats:
        return ManagerStats(capacity=0, used=0)

    @override
    def reset_cache(self) -> None:
        return None


manager = GoodManager()
ctx = ReqContext("request-0")
key = make_offload_key(b"block")
keys = [key]
