"""Store admission by reuse: a wrapper that stores a block only once it has been seen several times.

Most blocks of a serving workload are used once; writing them to host memory costs
transfer bandwidth and pushes out blocks that would have been reused. This wrapper
counts, in an LRU-bounded tracker, how many requests offered each key to
``prepare_store``, and forwards a key to the wrapped manager only from the
``store_threshold``-th request on.

Its state stays bounded by traffic-independent sizes: the tracker by
``max_tracker_size``; the admitted keys by what ``inner`` holds, since every way a key
leaves ``inner`` reaches the filter (evictions in the outputs it forwards, evictions
``inner`` makes on its own through :class:`~kvcontract.managers.evictions.ReportsEvictions`,
failed stores, ``reset_cache``); the keys a request offered by the request, until
``on_request_finished``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass, field, replace

from typing_extensions import override

from kvcontract.contracts import ManagerStats, OffloadingManager, OffloadKey, PrepareStoreOutput, ReqContext
from kvcontract.managers.evictions import ReportsEvictions
from kvcontract.managers.forwarding import ForwardingManager

__all__ = ["FilterReusedOffloadingManager"]

_NONE_COUNTED: frozenset[OffloadKey] = frozenset()


@dataclass
class _OfferedKeys:
    """Per-request state: the keys already counted for this request."""

    keys: set[OffloadKey] = field(default_factory=set[OffloadKey])


class FilterReusedOffloadingManager(ForwardingManager):
    """Forwards a key to ``inner.prepare_store`` once ``store_threshold`` requests have offered it.

    A key is counted at most once per request. The tracker keeps the ``max_tracker_size``
    most recently offered keys. A key the filter forwarded stays admitted while ``inner``
    holds it, so it is always in the batch ``inner`` sees and never evicted for it; it
    leaves when ``inner`` evicts it (in a forwarded output, or on its own and reported to
    the filter), when its store fails, and at ``reset_cache``. Everything else goes to
    ``inner``.
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
        super().__init__(inner)
        self._threshold = store_threshold
        self._limit = max_tracker_size
        self._seen: OrderedDict[OffloadKey, int] = OrderedDict()
        self._admitted: set[OffloadKey] = set()
        self._in_flight: set[OffloadKey] = set()
        self._skipped = 0
        if isinstance(inner, ReportsEvictions):
            inner.add_eviction_listener(self._forget_evicted)

    def seen(self, key: OffloadKey) -> int:
        """How many requests have offered ``key`` (0 if the tracker has forgotten it)."""
        return self._seen.get(key, 0)

    @property
    def admitted(self) -> Set[OffloadKey]:
        """Keys forwarded without counting: those ``inner`` holds or is storing for this filter."""
        return self._admitted

    def _forget_evicted(self, keys: Sequence[OffloadKey]) -> None:
        """``inner`` evicted ``keys`` on its own (a tier promotion took their blocks)."""
        self._admitted.difference_update(keys)

    @override
    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        offered = req_context.get_state(_OfferedKeys)
        counted = offered.keys if offered is not None else _NONE_COUNTED
        seen, admitted, threshold = self._seen, self._admitted, self._threshold
        forward: list[OffloadKey] = []
        first_offers: dict[OffloadKey, int] = {}
        for key in keys:
            if key in admitted:
                forward.append(key)
                continue
            count = first_offers.get(key)
            if count is None:
                count = seen.get(key, 0)
                if key not in counted:
                    count += 1
                    first_offers[key] = count
            if count >= threshold:
                forward.append(key)
        output = self._inner.prepare_store(forward, req_context)
        # The offers count only once inner has answered, so a prepare_store that raised changed nothing.
        self._skipped += len(keys) - len(forward)
        if first_offers:
            if offered is None:
                offered = _OfferedKeys()
                req_context.set_state(offered)
            offered.keys.update(first_offers)
            for key, count in first_offers.items():
                seen[key] = count
                seen.move_to_end(key)
            for _ in range(len(seen) - self._limit):
                seen.popitem(last=False)
        if output is not None:
            admitted.update(output.keys_to_store)
            admitted.difference_update(output.evicted_keys)
            self._in_flight.update(output.keys_to_store)
        return output

    @override
    def stats(self) -> ManagerStats:
        """``inner``'s stats, with the blocks this filter kept out added to ``skipped_stores``."""
        inner = self._inner.stats()
        return replace(inner, skipped_stores=inner.skipped_stores + self._skipped)

    @override
    def complete_store(self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool = True) -> None:
        done = list(keys)
        self._inner.complete_store(done, req_context, success)
        in_flight = self._in_flight
        if not success:
            self._admitted.difference_update(key for key in done if key in in_flight)
        in_flight.difference_update(done)

    @override
    def on_request_finished(self, req_context: ReqContext) -> None:
        """Forward, then forget which keys the request offered: it will offer none again."""
        self._inner.on_request_finished(req_context)
        offered = req_context.get_state(_OfferedKeys)
        if offered is not None:
            offered.keys.clear()

    @override
    def reset_cache(self) -> None:
        """Clear ``inner``; only keys whose store is in flight stay admitted, as ``inner`` keeps those.

        A block that a load pins survives in ``inner`` too but loses its admission: it is
        counted again like any key, and ``inner`` never stores a key it holds twice.
        Reuse counts stay: they describe the traffic, not what ``inner`` holds.
        """
        self._inner.reset_cache()
        self._admitted.intersection_update(self._in_flight)

    @override
    def __repr__(self) -> str:
        return (
            f"FilterReusedOffloadingManager({self._inner!r}, store_threshold={self._threshold}, "
            f"max_tracker_size={self._limit})"
        )
