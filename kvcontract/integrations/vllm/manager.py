"""``KVContractOffloadingManager``: any kvcontract manager behind vLLM's ``OffloadingManager``.

vLLM's scheduler calls differ from kvcontract's contract in four ways, mapped here:

- keys come as ``Collection``; :mod:`~kvcontract.integrations.vllm.keys` makes them a
  ``Sequence`` once per call, and ``complete_*`` (``Iterable`` in the contract) pass on as they are;
- vLLM never calls ``touch``: its own manager ranks a request's blocks by position as
  soon as they are loaded or offered for storing, and commits that order when the
  request finishes, which the scheduler reports only a step later, after that step's
  stores have evicted. So the adapter touches at each ``prepare_load`` and
  ``prepare_store``: every key the request has loaded or offered so far, in call order
  (the scheduler offers chunks in prefix order), first key most recent. Their order is
  then committed at every call, and ``on_request_finished`` only forgets them;
- ``on_new_request`` opens kvcontract's own ``ReqContext`` for the request (its
  ``params`` are vLLM's ``kv_transfer_params``), attached to vLLM's context as state;
- ``RETRY`` (a tier still promoting) and the other lookup answers map one to one;
- ``on_schedule_end`` and ``has_pending_work`` reach the manager that works between steps
  (the tiering manager, found below any decorators, see :mod:`~kvcontract.integrations.vllm.steps`),
  so its tier jobs land and its promotions are submitted on every step.

Hot path: ``lookup`` runs once per block and every other method once per call, so each
reads the previous request's state from a one-entry cache inline, calls inner methods
bound and typed once, and compares answers by identity; measured by
``tools/bench_vllm_adapter.py`` (figures and where the time goes in docs/vllm.md).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import cast

from typing_extensions import override
from vllm.distributed.kv_transfer.kv_connector.v1.offloading.metrics import OffloadingConnectorStats
from vllm.v1.kv_offload.base import LookupResult as VLLMLookupResult
from vllm.v1.kv_offload.base import OffloadingEvent as VLLMOffloadingEvent
from vllm.v1.kv_offload.base import OffloadingManager as VLLMOffloadingManager
from vllm.v1.kv_offload.base import OffloadKey as VLLMOffloadKey
from vllm.v1.kv_offload.base import PrepareStoreOutput as VLLMPrepareStoreOutput
from vllm.v1.kv_offload.base import ReqContext as VLLMReqContext
from vllm.v1.kv_offload.base import RequestOffloadingContext, ScheduleEndContext
from vllm.v1.metrics.cache_hit_source import CacheHitSource

from kvcontract.contracts import LookupResult, OffloadingManager, OffloadKey, ReqContext
from kvcontract.integrations.vllm.events import as_vllm_events
from kvcontract.integrations.vllm.host_spec import KVContractHostSpec
from kvcontract.integrations.vllm.keys import as_contract_keys, as_vllm_keys
from kvcontract.integrations.vllm.stats import StatsReporter
from kvcontract.integrations.vllm.steps import find_work_between_steps

__all__ = ["KVContractOffloadingManager"]

_HIT, _MISS, _PENDING = LookupResult.HIT, LookupResult.MISS, LookupResult.HIT_PENDING
_V_HIT, _V_MISS = VLLMLookupResult.HIT, VLLMLookupResult.MISS
_V_PENDING, _V_RETRY = VLLMLookupResult.HIT_PENDING, VLLMLookupResult.RETRY


@dataclass(eq=False, slots=True)
class _Request:
    """Per-request state on vLLM's context: kvcontract's context and the keys the request used so far."""

    context: ReqContext
    keys: Sequence[OffloadKey] = ()
    seen: set[OffloadKey] | None = None
    """The set of ``keys`` once a second call merged them: each later call hashes only its own keys."""


_NO_REQUEST = _Request(ReqContext("kvcontract-no-request"))
"""What the one-request cache holds while no vLLM context is cached (``_last_vllm`` is ``None``)."""


class KVContractOffloadingManager(VLLMOffloadingManager):
    """vLLM's scheduler-side manager, backed by the kvcontract manager ``inner``.

    Events reach vLLM only when ``events`` is on (vLLM's ``enable_kv_cache_events``);
    ``get_stats`` reports the inner manager's counters (see :mod:`~kvcontract.integrations.vllm.stats`).
    """

    def __init__(self, inner: OffloadingManager, *, events: bool = False) -> None:
        self._inner = inner
        self._events = events
        self._stats = StatsReporter()
        # The inner methods take kvcontract keys; vLLM's are the same bytes (keys.py), so the
        # bound methods are typed for vLLM's keys once here instead of converting each call.
        self._lookup = cast(
            "Callable[[VLLMOffloadKey, ReqContext], LookupResult]", inner.lookup
        )  # same bytes in both OffloadKey NewTypes
        self._complete_load = cast(
            "Callable[[Collection[VLLMOffloadKey], ReqContext], None]", inner.complete_load
        )  # same bytes; a Collection is the contract's Iterable
        self._complete_store = cast(
            "Callable[[Collection[VLLMOffloadKey], ReqContext, bool], None]", inner.complete_store
        )  # same bytes; a Collection is the contract's Iterable
        self._prepare_load = inner.prepare_load
        self._prepare_store = inner.prepare_store
        self._touch = inner.touch
        self._last_vllm: VLLMReqContext | None = None
        self._last = _NO_REQUEST
        self._between_steps = find_work_between_steps(inner)

    @property
    def inner(self) -> OffloadingManager:
        """The kvcontract manager this adapter drives."""
        return self._inner

    def _request(self, req_context: VLLMReqContext) -> _Request:
        """The request's state, made on its first call; every method reads ``_last`` first, inline."""
        state = req_context.get_state(_Request)
        if state is None:
            params = req_context.kv_transfer_params or {}
            state = _Request(ReqContext(req_context.req_id, params))
            req_context.set_state(state)
        self._last_vllm, self._last = req_context, state
        return state

    @override
    def on_new_request(self, req_context: VLLMReqContext) -> RequestOffloadingContext:
        self._request(req_context)
        return RequestOffloadingContext()

    @override
    def lookup(self, key: VLLMOffloadKey, req_context: VLLMReqContext) -> VLLMLookupResult:
        request = self._last if req_context is self._last_vllm else self._request(req_context)
        result = self._lookup(key, request.context)
        if result is _HIT:
            return _V_HIT
        if result is _MISS:
            return _V_MISS
        return _V_PENDING if result is _PENDING else _V_RETRY

    @override
    def get_load_source(self, key: VLLMOffloadKey, req_context: VLLMReqContext) -> CacheHitSource:
        return CacheHitSource.HOST

    @override
    def prepare_load(self, keys: Collection[VLLMOffloadKey], req_context: VLLMReqContext) -> KVContractHostSpec:
        request = self._last if req_context is self._last_vllm else self._request(req_context)
        ordered = as_contract_keys(keys)
        spec = self._prepare_load(ordered, request.context)
        self._commit_recency(request, ordered)
        return KVContractHostSpec(spec)

    def _commit_recency(self, request: _Request, keys: Sequence[OffloadKey]) -> None:
        """Touch everything ``request`` loaded or offered so far, ``keys`` last, first key most recent.

        A key offered twice keeps its first position. The usual call has no such key and
        pays one concatenation and the hashing of its own keys; only a repeat rebuilds the list.
        """
        done = request.keys
        if done:
            seen = request.seen
            if seen is None:
                seen = request.seen = set(done)
            before = len(seen)
            seen.update(keys)
            if before == len(done) and len(seen) == before + len(keys):
                keys = [*done, *keys]
            else:
                keys = list(dict.fromkeys([*done, *keys]))
        request.keys = keys
        self._touch(keys, request.context)

    @override
    def touch(self, keys: Collection[VLLMOffloadKey], req_context: VLLMReqContext) -> None:
        request = self._last if req_context is self._last_vllm else self._request(req_context)
        self._touch(as_contract_keys(keys), request.context)

    @override
    def complete_load(self, keys: Collection[VLLMOffloadKey], req_context: VLLMReqContext) -> None:
        request = self._last if req_context is self._last_vllm else self._request(req_context)
        self._complete_load(keys, request.context)

    @override
    def prepare_store(
        self, keys: Collection[VLLMOffloadKey], req_context: VLLMReqContext
    ) -> VLLMPrepareStoreOutput | None:
        request = self._last if req_context is self._last_vllm else self._request(req_context)
        ordered = as_contract_keys(keys)
        output = self._prepare_store(ordered, request.context)
        self._commit_recency(request, ordered)
        if output is None:
            return None
        return VLLMPrepareStoreOutput(
            as_vllm_keys(output.keys_to_store), KVContractHostSpec(output.store_spec), as_vllm_keys(output.evicted_keys)
        )

    @override
    def complete_store(
        self, keys: Collection[VLLMOffloadKey], req_context: VLLMReqContext, success: bool = True
    ) -> None:
        request = self._last if req_context is self._last_vllm else self._request(req_context)
        self._complete_store(keys, request.context, success)

    @override
    def on_request_finished(self, req_context: VLLMReqContext) -> None:
        request = self._last if req_context is self._last_vllm else self._request(req_context)
        request.keys = ()
        request.seen = None
        self._inner.on_request_finished(request.context)
        self._last_vllm, self._last = None, _NO_REQUEST

    @override
    def on_schedule_end(self, context: ScheduleEndContext) -> None:
        if self._between_steps is not None:
            self._between_steps.end_step()

    @override
    def has_pending_work(self) -> bool:
        return self._between_steps is not None and self._between_steps.has_pending_work()

    @override
    def take_events(self) -> list[VLLMOffloadingEvent]:
        events = self._inner.take_events()
        return as_vllm_events(events) if self._events and events else []

    @override
    def get_stats(self) -> OffloadingConnectorStats:
        return self._stats.report(self._inner.stats())

    @override
    def reset_cache(self) -> None:
        self._inner.reset_cache()

    @override
    def shutdown(self) -> None:
        self._inner.shutdown()

    @override
    def __repr__(self) -> str:
        return f"KVContractOffloadingManager({self._inner!r})"
