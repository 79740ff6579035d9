"""A manager decorator: per-request prefix-hit metrics around any OffloadingManager.

It inherits :class:`kvcontract.managers.ForwardingManager`, so every call it does not
override still reaches the wrapped manager, and it keeps the metrics of the most recent
``keep`` finished requests only: a decorator's memory must not grow with traffic.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from typing_extensions import override

from kvcontract import (
    LoadStoreSpec,
    LookupResult,
    OffloadingManager,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
)
from kvcontract.managers import ForwardingManager


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


class MetricsManager(ForwardingManager):
    """Records, per request, lookups, hits, loads and stores; ``finished`` holds the last ``keep`` requests."""

    def __init__(self, inner: OffloadingManager, *, keep: int = 1_000) -> None:
        if type(keep) is not int or keep < 1:
            raise ValueError(f"keep must be an int >= 1 (finished requests to remember), got {keep!r}")
        super().__init__(inner)
        self.finished: deque[RequestMetrics] = deque(maxlen=keep)

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
        spec = self._inner.prepare_load(keys, req_context)
        self._counts(req_context).loaded += len(keys)
        return spec

    @override
    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        plan = self._inner.prepare_store(keys, req_context)
        if plan is not None:
            self._counts(req_context).stored += len(plan.keys_to_store)
        return plan

    @override
    def on_request_finished(self, req_context: ReqContext) -> None:
        counts = self._counts(req_context)
        self.finished.append(
            RequestMetrics(req_context.req_id, counts.lookups, counts.hits, counts.loaded, counts.stored)
        )
        self._inner.on_request_finished(req_context)
