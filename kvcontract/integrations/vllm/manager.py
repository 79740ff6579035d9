"""``KVContractOffloadingManager``: any kvcontract manager behind vLLM's ``OffloadingManager``.

vLLM's scheduler calls differ from kvcontract's contract in four ways, mapped here:

- keys come as ``Collection``; :mod:`~kvcontract.integrations.vllm.keys` makes them a
  ``Sequence`` once per call, and ``complete_*`` (``Iterable`` in the contract) pass on as they are;
- vLLM never calls ``touch`` (0.33 declares it, 0.34 removed it): its own manager ranks a request's blocks by position as
  soon as they are loaded or offered for storing, and commits that order when the
  request finishes, which the scheduler reports only a step later, after that step's
  stores have evicted. So the adapter touches at each ``prepare_load`` and
  ``prepare_store``: every key the request has loaded or offered so far, in call order
  (the scheduler offers chunks in prefix order), first key most recent. Their order is
  then committed at every call, and ``on_request_finished`` only forgets them;
- ``on_new_request`` opens kvcontract's own ``ReqContext`` for the request (its
  ``params`` are vLLM's ``kv_transfer_params``), attached to vLLM's context as state;
  :func:`request_tokens` reads vLLM 0.34's token counts of the request through it;
- ``RETRY`` (a tier still promoting) and the other lookup answers map one to one;
- with an ``observer`` (the live what-if, ``observe.whatif`` in the config), each finished
  request's keys (those it loaded, then those it offered, in prefix order) go to it, and its
  gauges ride along in ``get_stats``;
- ``on_schedule_end`` and ``has_pending_work`` reach the manager that works between steps
  (the tiering manager, found below any decorators, see :mod:`~kvcontract.integrations.vllm.steps`),
  so its tier jobs land and its promotions are submitted on every step.

Hot path: ``lookup`` runs once per block and every other method once per call, so each
reads the previous request's state from a one-entry cache inline, calls inner methods
bound and typed once (for vLLM's keys, so nothing converts a list), compares answers by
identity, and makes one object per request (kvcontract's context, which also holds the
request's keys) and only the value objects vLLM reads; measured by
``tools/bench_vllm_adapter.py`` (figures and where the time goes in docs/vllm.md).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, cast

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

from kvcontract.contracts import LoadStoreSpec, LookupResult, OffloadingManager, OffloadKey, ReqContext
from kvcontract.integrations.vllm.events import as_vllm_events
from kvcontract.integrations.vllm.host_spec import KVContractHostSpec
from kvcontract.integrations.vllm.keys import as_key_list, as_key_sequence
from kvcontract.integrations.vllm.releases import ConfigInfoMapping
from kvcontract.integrations.vllm.request_tokens import RequestTokens, tokens_of
from kvcontract.integrations.vllm.stats import StatsReporter
from kvcontract.integrations.vllm.steps import find_work_between_steps
from kvcontract.observe import WhatIfObserver

__all__ = ["KVContractOffloadingManager", "request_tokens"]

_HIT, _MISS, _PENDING = LookupResult.HIT, LookupResult.MISS, LookupResult.HIT_PENDING
_V_HIT, _V_MISS = VLLMLookupResult.HIT, VLLMLookupResult.MISS
_V_PENDING, _V_RETRY = VLLMLookupResult.HIT_PENDING, VLLMLookupResult.RETRY


@dataclass(eq=False)
class _Request(ReqContext):
    """kvcontract's context of one vLLM request (state on vLLM's context), with the keys the request used so far."""

    keys: Sequence[VLLMOffloadKey] = field(default=(), repr=False)
    seen: set[VLLMOffloadKey] | None = field(default=None, repr=False)
    """The set of ``keys`` once a second call merged them: each later call hashes only its own keys."""
    vllm: VLLMReqContext | None = field(default=None, repr=False)
    """vLLM's context of the request, for :func:`request_tokens`."""


def request_tokens(req_context: ReqContext) -> RequestTokens | None:
    """vLLM's token counts (0.34) of the request behind a context this adapter passed to a kvcontract
    manager; ``None`` for any other context, or on vLLM 0.33."""
    vllm = req_context.vllm if isinstance(req_context, _Request) else None
    return None if vllm is None else tokens_of(vllm)


class _StoreOutput(Protocol):
    """kvcontract's ``PrepareStoreOutput`` as the adapter reads it, its keys typed as vLLM's (the same bytes)."""

    @property
    def keys_to_store(self) -> Sequence[VLLMOffloadKey]:
        """The keys to write."""
        ...

    @property
    def store_spec(self) -> LoadStoreSpec:
        """Where to write them."""
        ...

    @property
    def evicted_keys(self) -> Sequence[VLLMOffloadKey]:
        """What was evicted for them."""
        ...


_HOST = CacheHitSource("host")
"""By value: vLLM 0.34 makes ``CacheHitSource`` a ``StrEnum`` (Python 3.11), which mypy's 3.10 target reads as ``str`` members."""

_NO_REQUEST = _Request("kvcontract-no-request")
"""What the one-request cache holds while no vLLM context is cached (``_last_vllm`` is ``None``)."""

_NO_PARAMS: Mapping[str, object] = MappingProxyType({})
"""The parameters of a request vLLM gave none (shared: nothing writes a context's parameters)."""

_CHUNK_LEVEL = RequestOffloadingContext()
"""``on_new_request``'s answer for every request: vLLM only reads its ``policy`` (shared, never written)."""


def _remember(request: _Request, keys: Sequence[VLLMOffloadKey]) -> Sequence[VLLMOffloadKey]:
    """Add ``keys`` to ``request``'s keys; all of them, in call order, as vLLM ranks them (first most recent).

    A key offered twice keeps its first position. The first call keeps ``keys`` as they are;
    a later one pays one concatenation and the hashing of its own keys (of all keys so far,
    once, on the second call); only a repeat rebuilds the list.
    """
    done = request.keys
    if not done:
        request.keys = keys
        return keys
    merged = [*done, *keys]
    seen = request.seen
    if seen is None:
        seen = request.seen = set(merged)
        fresh = len(seen) == len(merged)
    else:
        before = len(seen)
        seen.update(keys)
        fresh = before == len(done) and len(seen) == before + len(keys)
    request.keys = merged if fresh else list(dict.fromkeys(merged))
    return request.keys


class KVContractOffloadingManager(VLLMOffloadingManager):
    """vLLM's scheduler-side manager, backed by the kvcontract manager ``inner``.

    Events reach vLLM only when ``events`` is on (vLLM's ``enable_kv_cache_events``);
    ``get_stats`` reports the inner manager's counters (see :mod:`~kvcontract.integrations.vllm.stats`),
    and ``config_info`` the labels ``info`` gives (the spec's, see :mod:`~kvcontract.integrations.vllm.config_info`).
    """

    def __init__(
        self,
        inner: OffloadingManager,
        *,
        events: bool = False,
        info: ConfigInfoMapping | None = None,
        observer: WhatIfObserver | None = None,
    ) -> None:
        self._inner = inner
        self._observer = observer
        self._events = events
        self._info: ConfigInfoMapping = info if info is not None else {}
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
        self._prepare_load = cast(
            "Callable[[Sequence[VLLMOffloadKey], ReqContext], LoadStoreSpec]", inner.prepare_load
        )  # same bytes in both OffloadKey NewTypes
        self._prepare_store = cast(
            "Callable[[Sequence[VLLMOffloadKey], ReqContext], _StoreOutput | None]", inner.prepare_store
        )  # same bytes; kvcontract's PrepareStoreOutput has _StoreOutput's fields
        self._touch = cast(
            "Callable[[Sequence[VLLMOffloadKey], ReqContext], None]", inner.touch
        )  # same bytes in both OffloadKey NewTypes
        self._finished = inner.on_request_finished
        self._last_vllm: VLLMReqContext | None = None
        self._last = _NO_REQUEST
        self._between_steps = find_work_between_steps(inner)
        self._stored_by: dict[VLLMOffloadKey, VLLMReqContext] = {}
        """With events on, the request of each key stored since the last ``take_events``, for vLLM's ``req_context``."""

    @property
    def inner(self) -> OffloadingManager:
        """The kvcontract manager this adapter drives."""
        return self._inner

    def _request(self, req_context: VLLMReqContext) -> _Request:
        """The request's state, made on its first call; every method reads ``_last`` first, inline."""
        state = req_context.get_state(_Request)
        if state is None:
            state = _Request(req_context.req_id, req_context.kv_transfer_params or _NO_PARAMS, vllm=req_context)
            req_context.set_state(state)
        self._last_vllm, self._last = req_context, state
        return state

    @override
    def on_new_request(self, req_context: VLLMReqContext) -> RequestOffloadingContext:
        self._request(req_context)
        return _CHUNK_LEVEL

    @override
    def lookup(self, key: VLLMOffloadKey, req_context: VLLMReqContext) -> VLLMLookupResult:
        result = self._lookup(key, self._last if req_context is self._last_vllm else self._request(req_context))
        if result is _HIT:
            return _V_HIT
        if result is _MISS:
            return _V_MISS
        return _V_PENDING if result is _PENDING else _V_RETRY

    @override
    def get_load_source(self, key: VLLMOffloadKey, req_context: VLLMReqContext) -> CacheHitSource:
        return _HOST

    @override
    def prepare_load(self, keys: Collection[VLLMOffloadKey], req_context: VLLMReqContext) -> KVContractHostSpec:
        request = self._last if req_context is self._last_vllm else self._request(req_context)
        ordered = as_key_sequence(keys)
        spec = self._prepare_load(ordered, request)
        self._touch(_remember(request, ordered), request)
        return KVContractHostSpec(spec)

    @override
    def complete_load(self, keys: Collection[VLLMOffloadKey], req_context: VLLMReqContext) -> None:
        request = self._last if req_context is self._last_vllm else self._request(req_context)
        self._complete_load(keys, request)

    @override
    def prepare_store(
        self, keys: Collection[VLLMOffloadKey], req_context: VLLMReqContext
    ) -> VLLMPrepareStoreOutput | None:
        request = self._last if req_context is self._last_vllm else self._request(req_context)
        ordered = as_key_sequence(keys)
        output = self._prepare_store(ordered, request)
        self._touch(_remember(request, ordered), request)
        if output is None:
            return None
        return VLLMPrepareStoreOutput(
            as_key_list(output.keys_to_store),
            KVContractHostSpec(output.store_spec),
            as_key_list(output.evicted_keys),
        )

    @override
    def complete_store(
        self, keys: Collection[VLLMOffloadKey], req_context: VLLMReqContext, success: bool = True
    ) -> None:
        request = self._last if req_context is self._last_vllm else self._request(req_context)
        self._complete_store(keys, request, success)
        if self._events and success:
            self._stored_by.update(dict.fromkeys(keys, req_context))

    @override
    def on_request_finished(self, req_context: VLLMReqContext) -> None:
        request = self._last if req_context is self._last_vllm else self._request(req_context)
        if self._observer is not None and request.keys:
            self._observer.observe(cast("Sequence[OffloadKey]", request.keys))  # same bytes in both OffloadKey NewTypes
        request.keys = ()
        request.seen = None
        self._finished(request)
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
        converted = as_vllm_events(events, stored_by=self._stored_by) if self._events and events else []
        self._stored_by.clear()  # a store's event is made in its complete_store: what is left is stale
        return converted

    @override
    def get_stats(self) -> OffloadingConnectorStats:
        return self._stats.report(self._inner.stats(), self._observer)

    @override
    def config_info(self) -> Sequence[ConfigInfoMapping]:
        return [self._info]

    @override
    def reset_cache(self) -> None:
        self._inner.reset_cache()

    @override
    def shutdown(self) -> None:
        self._inner.shutdown()

    @override
    def __repr__(self) -> str:
        return f"KVContractOffloadingManager({self._inner!r})"
