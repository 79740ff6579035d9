"""A manager decorator: per-request prefix-hit metrics around any OffloadingManager."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from typing_extensions import override

from kvcontract import (
    LoadStoreSpec,
    LookupResult,
    ManagerStats,
    OffloadingEvent,
    OffloadingManager,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
)


@dataclass(frozen=True)
class RequestMetrics:
    """What one finished request got from offload."""

    req_id: str
    lookups: int
    hits: int
    loaded: int
    stored: int


@dataclass
class _Counts:
    lookups: int = 0
    hits: int = 0
    loaded: int = 0
    stored: int = 0


class MetricsManager(OffloadingManager):
    """Forwards every call to ``inner`` and records, per request, lookups, hits, loads, stores."""

    def __init__(self, inner: OffloadingManager) -> None:
        self._inner = inner
        self.finished: list[RequestMetrics] = []

    @staticmethod
    def _counts(req_context: ReqContext) -> _Counts:
        counts = req_context.get_state(_Counts)
        if counts is None:
            counts = _Counts()
            req_context.set_state(counts)
        return counts

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        answer = self._inner.lookup(key, req_context)
        counts = self._counts(req_context)
        counts.lookups += 1
        counts.hits += answer is LookupResult.HIT
        return answer

    @override
    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> LoadStoreSpec:
        self._counts(req_context).loaded += len(keys)
        return self._inner.prepare_load(keys, req_context)

    @override
    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
        self._inner.touch(keys, req_context)

    @override
    def complete_load(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        self._inner.complete_load(keys, req_context)

    @override
    def prepare_store(
        self, keys: Sequence[OffloadKey], req_context: ReqContext
    ) -> PrepareStoreOutput | None:
        plan = self._inner.prepare_store(keys, req_context)
        if plan is not None:
            self._counts(req_context).stored += len(plan.keys_to_store)
        return plan

    @override
    def complete_store(
        self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool = True
    ) -> None:
        self._inner.complete_store(keys, req_context, success)

    @override
    def on_request_finished(self, req_context: ReqContext) -> None:
        counts = self._counts(req_context)
        self.finished.append(
            RequestMetrics(req_context.req_id, counts.lookups, counts.hits, counts.loaded, counts.stored)
        )
        self._inner.on_request_finished(req_context)

    @override
    def take_events(self) -> list[OffloadingEvent]:
        return self._inner.take_events()

    @override
    def stats(self) -> ManagerStats:
        return self._inner.stats()

    @override
    def reset_cache(self) -> None:
        self._inner.reset_cache()

    @override
    def shutdown(self) -> None:
        self._inner.shutdown()
