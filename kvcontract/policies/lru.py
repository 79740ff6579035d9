"""Least recently used: evicts the block whose last use is oldest."""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Sequence, Set
from itertools import islice

from typing_extensions import override

from kvcontract.contracts import OffloadKey
from kvcontract.policies.base import PolicyBase

__all__ = ["LRUPolicy"]

_REF_CNT = operator.attrgetter("ref_cnt")


class LRUPolicy(PolicyBase):
    """One recency order; ``touch`` of a request's keys leaves its first key most recent.

    Since a request's later blocks end up less recent than its earlier ones, chains
    are evicted from their tails.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._order: OrderedDict[OffloadKey, None] = OrderedDict()

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        order, parked = self._order, self._parked
        move = order.move_to_end
        for key in reversed(keys):
            if key in order:
                move(key)
            elif key in parked:
                self._unpark_if_ready(key)

    @override
    def _place(self, key: OffloadKey) -> None:
        self._order[key] = None

    @override
    def _place_all(self, keys: Sequence[OffloadKey]) -> None:
        order = self._order
        for key in keys:
            order[key] = None

    @override
    def _unlink(self, key: OffloadKey) -> None:
        del self._order[key]

    @override
    def _relink(self, key: OffloadKey) -> None:
        self._order[key] = None

    @override
    def _forget(self, key: OffloadKey, linked: bool) -> None:
        if linked:
            del self._order[key]

    @override
    def _select(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        order, blocks, parked = self._order, self._blocks, self._parked
        oldest = list(islice(order, n))
        if protected.isdisjoint(oldest) and not any(map(_REF_CNT, map(blocks.__getitem__, oldest))):
            if len(oldest) < n:
                return None
            for _ in range(n):
                order.popitem(last=False)
            return oldest
        victims: list[OffloadKey] = []
        taken: list[OffloadKey] = []
        while len(victims) < n and order:
            key, _none = order.popitem(last=False)
            if key in protected:
                taken.append(key)
            elif blocks[key].ref_cnt:
                parked[key] = None
            else:
                taken.append(key)
                victims.append(key)
        if len(victims) < n:
            self._put_back(taken)
            return None
        if len(taken) > len(victims):
            chosen = set(victims)
            self._put_back([key for key in taken if key not in chosen])
        return victims

    @override
    def _clear_order(self) -> None:
        self._order.clear()

    def _put_back(self, taken: list[OffloadKey]) -> None:
        """Return keys taken from the least recent end to it, in their original order."""
        order = self._order
        for key in reversed(taken):
            order[key] = None
            order.move_to_end(key, last=False)
