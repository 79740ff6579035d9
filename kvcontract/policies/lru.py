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
        order = self._order
        move = order.move_to_end
        if self._parked or self._front:
            front, take_parked = self._front, self._take_parked
            for key in reversed(keys):
                if key in order:
                    move(key)
                    front.pop(key, None)
                elif take_parked(key):
                    order[key] = None
            return
        # Nothing parked or stamped (the usual case): a bare move per key, the hot loop of a replay.
        for key in reversed(keys):
            if key in order:
                move(key)

    @override
    def _place(self, key: OffloadKey) -> None:
        self._order[key] = None

    @override
    def _place_all(self, keys: Sequence[OffloadKey]) -> None:
        order = self._order
        for key in keys:
            order[key] = None

    @override
    def _relink(self, key: OffloadKey, stamp: int) -> None:
        self._return_to(self._order, key, None, stamp)

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
            if self._front:
                self._drop_stamps(oldest)
            return oldest
        victims: list[OffloadKey] = []
        busy: list[OffloadKey] = []
        front, stamp = self._front, self._stamp
        for key in order:
            front[key] = stamp(key)
            if key in protected:
                continue
            if blocks[key].ref_cnt:
                busy.append(key)
            else:
                victims.append(key)
                if len(victims) == n:
                    break
        if len(victims) < n:
            return None
        for key in busy:
            del order[key]
            parked[key] = front.pop(key)
        for key in victims:
            del order[key]
        self._drop_stamps(victims)
        return victims

    @override
    def _clear_order(self) -> None:
        self._order.clear()
