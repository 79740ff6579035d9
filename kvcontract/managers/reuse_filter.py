"""Store admission by reuse: a wrapper that stores a block only once it has been seen several times.

Most blocks of a serving workload are used once; writing them to host memory costs
transfer bandwidth and pushes out blocks that would have been reused. This wrapper
counts, in an LRU-bounded tracker, how many requests offered each key to
``prepare_store``, and forwards a key to the wrapped manager only from the
``store_threshold``-th request on.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from typing_extensions import override

from kvcontract.contracts import (
    LoadStoreSpec,
    LookupResult,
    ManagerStats,
    OffloadingEvent,
    OffloadingManager,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
)

__all__ = ["FilterReusedOffloadingManager"]


@dataclass
class _OfferedKeys:
    """Per-request state: the keys already counted for this request."""

    keys: set[OffloadKey] = field(default_factory=set[OffloadKey])


class FilterReusedOffloadingManager(OffloadingManager):
    """Forwards a key to ``inner.prepare_store`` once ``store_threshold`` requests have offered it.

    A key is counted at most once per request. The tracker keeps the ``max_tracker_size``
    most recently offered keys. A key the filter forwarded stays admitted until ``inner``
    reports it evicted or its store failed, so a key ``inner`` holds is always in the
    batch ``inner`` sees, and never evicted for it. Everything else goes to ``inner``.
    """

    def __init__(
        self,
        inner: OffloadingManager,
        *,
        store_threshold: int = 2,
        max_tracker_size: int = 64_000,
    ) -> None:
        if type(store_threshold) is not int or store_threshold < 2:
            raise ValueError(
                f"store_threshold must be an int >= 2 (1 would store everything: use the "
                f"inner manager alone), got {store_threshold!r}"
            )
        if type(max_tracker_size) is not int or max_tracker_size < 1:
            raise ValueError(f"max_tracker_size must be an int >= 1, got {max_tracker_size!r}")
        missing = [
            name
            for name in ("lookup", "prepare_load", "touch", "prepare_store", "stats", "reset_cache")
            if not callable(getattr(inner, name, None))
        ]
        if missing:
            raise ValueError(f"inner must be an OffloadingManager; {inner!r} lacks {', '.join(missing)}")
        self._inner = inner
        self._threshold = store_threshold
        self._limit = max_tracker_size
        self._seen: OrderedDict[OffloadKey, int] = OrderedDict()
        self._admitted: set[OffloadKey] = set()
        self._in_flight: set[OffloadKey] = set()

    @property
    def inner(self) -> OffloadingManager:
        """The wrapped manager."""
        return self._inner

    def seen(self, key: OffloadKey) -> int:
        """How many requests have offered ``key`` (0 if the tracker has forgotten it)."""
        return self._seen.get(key, 0)

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        return self._inner.lookup(key, req_context)

    @override
    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> LoadStoreSpec:
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
        offered = req_context.get_state(_OfferedKeys)
        if offered is None:
            offered = _OfferedKeys()
            req_context.set_state(offered)
        counted, seen, admitted = offered.keys, self._seen, self._admitted
        threshold = self._threshold
        forward: list[OffloadKey] = []
        for key in keys:
            if key in admitted:
                forward.append(key)
                continue
            if key in counted:
                count = seen.get(key, 0)
            else:
                counted.add(key)
                count = seen.get(key, 0) + 1
                seen[key] = count
                seen.move_to_end(key)
            if count >= threshold:
                forward.append(key)
        for _ in range(len(seen) - self._limit):
            seen.popitem(last=False)
        output = self._inner.prepare_store(forward, req_context)
        if output is not None:
            admitted.update(output.keys_to_store)
            admitted.difference_update(output.evicted_keys)
            self._in_flight.update(output.keys_to_store)
        return output

    @override
    def complete_store(
        self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool = True
    ) -> None:
        done = list(keys)
        self._inner.complete_store(done, req_context, success)
        in_flight = self._in_flight
        if not success:
            self._admitted.difference_update(key for key in done if key in in_flight)
        in_flight.difference_update(done)

    @override
    def on_request_finished(self, req_context: ReqContext) -> None:
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

    @override
    def __repr__(self) -> str:
        return (
            f"FilterReusedOffloadingManager({self._inner!r}, store_threshold={self._threshold}, "
            f"max_tracker_size={self._limit})"
        )
