"""A shadow cache: one eviction policy served whole requests as the engine driver serves a manager of it.

The what-if replays its sampled keys on one thread, so every load and store completes
within its request: no block is pinned or in flight when the next request looks up, and a
:class:`~kvcontract.managers.CPUOffloadingManager`'s reference counts, stores in flight,
request contexts and returned specs decide nothing but cost several microseconds a request.
A shadow keeps what decides hits: the policy, called through its ``CachePolicy`` methods in
the order :class:`~kvcontract.engine_driver.orders.RequestServer` calls the manager and the manager
calls them (a lookup of the longest held prefix, one store of the keys not held, evicting
for them outside the batch, a touch while the new blocks are in flight, then the
completion), and the reuse admission's tracker, as
:class:`~kvcontract.managers.FilterReusedOffloadingManager` keeps it. A property test
(tests/observe) checks that a shadow's hits equal the driver's replay of that manager.
"""

from __future__ import annotations

import inspect
import operator
from collections import OrderedDict
from collections.abc import Sequence

from kvcontract.contracts import BlockStatus, CachePolicy, OffloadKey
from kvcontract.enforce import unchecked
from kvcontract.policies import make_policy
from kvcontract.policies.prefix_reuse import PrefixReusePolicy

__all__ = ["ShadowCache"]

_BLOCK = operator.itemgetter(1)


class ShadowCache:
    """``policy`` over ``capacity`` blocks, behind reuse admission when ``store_threshold`` is given.

    ``store_threshold`` and ``max_tracker_size`` mean what they mean to
    :class:`~kvcontract.managers.FilterReusedOffloadingManager`: a key is stored from the
    ``store_threshold``-th request that offers it, counted in a tracker of the
    ``max_tracker_size`` most recently offered keys. ``rate`` is the fraction of the keys the
    shadow is served (its capacity is already scaled by it).
    """

    def __init__(
        self,
        capacity: int,
        policy: str,
        *,
        rate: float = 1.0,
        store_threshold: int | None = None,
        max_tracker_size: int = 64_000,
    ) -> None:
        self._policy = _sampled_policy(policy, capacity, rate)
        self._capacity = capacity
        # The contract's call checks off: every call below passes what the strict gate proves.
        self._get = unchecked(self._policy.get)
        self._touch = unchecked(self._policy.touch)
        self._evict = unchecked(self._policy.evict)
        self._insert_many = unchecked(self._policy.insert_many)
        self._threshold = store_threshold
        self._tracker_size = max_tracker_size
        self._seen: OrderedDict[OffloadKey, int] = OrderedDict()
        self._never_used = 0
        """Blocks handed out so far, all held: an evicted block is handed out again by the store it makes room for."""

    @property
    def policy(self) -> CachePolicy:
        """The eviction policy the shadow drives."""
        return self._policy

    @property
    def capacity(self) -> int:
        """The most blocks this shadow holds."""
        return self._capacity

    def serve(self, keys: Sequence[OffloadKey]) -> int:
        """Serve one request of ``keys`` (its prefix blocks, in order); how many, from the first, were held."""
        get = self._get
        found = 0
        for key in keys:
            if get(key) is None:
                break
            found += 1
        fresh = self._store(keys) if found < len(keys) else None
        self._touch(keys)
        if fresh:
            for block in fresh:
                block.ref_cnt = 0
        return found

    def _store(self, keys: Sequence[OffloadKey]) -> list[BlockStatus] | None:
        """Store the keys admission lets through and the policy does not hold; their blocks, in flight, or ``None`` if no room."""
        offered = keys if self._threshold is None else self._admitted(keys, self._threshold)
        get = self._get
        new = [key for key in offered if get(key) is None]
        if len(new) > 1:
            new = list(dict.fromkeys(new))  # a key may repeat in a request: store it once
        shortfall = len(new) - (self._capacity - self._never_used)  # every block handed out is held
        blocks: list[BlockStatus] = []
        if shortfall > 0:
            victims = self._evict(shortfall, frozenset(offered)) if len(new) <= self._capacity else None
            if victims is None:
                return None
            blocks = list(map(_BLOCK, victims))
            for block in blocks:
                block.ref_cnt = -1
        if shortfall < len(new):
            first = self._never_used
            self._never_used = first + len(new) - len(blocks)
            blocks += [BlockStatus(block_id) for block_id in range(first, self._never_used)]
        self._insert_many(new, blocks)
        return blocks

    def _admitted(self, keys: Sequence[OffloadKey], threshold: int) -> list[OffloadKey]:
        """The keys reuse admission passes on: those held, and those offered by ``threshold`` requests now."""
        get, seen = self._get, self._seen
        passed: list[OffloadKey] = []
        first_offers: dict[OffloadKey, int] = {}
        for key in keys:
            if get(key) is not None:
                passed.append(key)
                continue
            count = first_offers.get(key)
            if count is None:
                count = first_offers[key] = seen.get(key, 0) + 1
            if count >= threshold:
                passed.append(key)
        for key, count in first_offers.items():
            seen[key] = count
            seen.move_to_end(key)
        for _ in range(len(seen) - self._tracker_size):
            seen.popitem(last=False)
        return passed


def _sampled_policy(name: str, capacity: int, rate: float) -> CachePolicy:
    """Policy ``name`` for a shadow served ``rate`` of the keys: what counts reuses spans the same traffic.

    The prefix-aware policy averages reuse distances with a weight per reuse; a shadow sees
    ``rate`` times fewer reuses, so with the primary's weight its average would take ``1 / rate``
    times longer to follow the traffic (at rate 0.01 on the shipped trace it read 0.017 low, with
    this weight 0.008). Every other built-in policy's parameters scale with its capacity.
    """
    policy = make_policy(name, capacity)
    if rate >= 1.0 or type(policy) is not PrefixReusePolicy:
        return policy
    smoothing: float = inspect.signature(PrefixReusePolicy).parameters["smoothing"].default
    return PrefixReusePolicy(capacity, smoothing=1.0 - (1.0 - smoothing) ** (1.0 / rate))
