"""SIEVE (Zhang et al., NSDI'24): one FIFO, a visited bit per block, and a hand that sweeps it.

New blocks enter at the head. The hand moves from the tail towards the head, clearing
visited bits, and evicts the first block it finds unvisited; it wraps to the tail at the
head. Blocks never move on a hit, which is what makes SIEVE cheap.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence, Set

from typing_extensions import override

from kvcontract.contracts import OffloadKey
from kvcontract.policies.base import PolicyBase

__all__ = ["SIEVEPolicy"]


class SIEVEPolicy(PolicyBase):
    """SIEVE over offload blocks; a touch of a block whose store is in flight does not mark it visited.

    The queue is kept as two ordered halves: ``_passed`` (tail up to the hand, already
    swept in this lap) and ``_ahead`` (the hand up to the head, where new blocks land).
    The hand passes over protected and non-evictable blocks without clearing their bit.
    If ``evict`` returns ``None``, the blocks it took are back at the hand; the visited
    bits it cleared on the way stay cleared, as after a partial sweep.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._passed: OrderedDict[OffloadKey, bool] = OrderedDict()
        self._ahead: OrderedDict[OffloadKey, bool] = OrderedDict()

    def visited(self, key: OffloadKey) -> bool:
        """Whether ``key`` has been used since the hand last passed it."""
        return self._ahead.get(key, False) or self._passed.get(key, False)

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        ahead, passed, blocks, parked = self._ahead, self._passed, self._blocks, self._parked
        for key in keys:
            if key in ahead:
                if blocks[key].ref_cnt >= 0:
                    ahead[key] = True
            elif key in passed:
                if blocks[key].ref_cnt >= 0:
                    passed[key] = True
            elif key in parked:
                self._unpark_if_ready(key)

    @override
    def _place(self, key: OffloadKey) -> None:
        self._ahead[key] = False

    @override
    def _place_all(self, keys: Sequence[OffloadKey]) -> None:
        ahead = self._ahead
        for key in keys:
            ahead[key] = False

    @override
    def _unlink(self, key: OffloadKey) -> None:
        if key in self._ahead:
            del self._ahead[key]
        else:
            del self._passed[key]

    @override
    def _relink(self, key: OffloadKey) -> None:
        self._ahead[key] = False

    @override
    def _forget(self, key: OffloadKey, linked: bool) -> None:
        if linked:
            self._unlink(key)

    @override
    def _select(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        ahead, passed, blocks = self._ahead, self._passed, self._blocks
        victims: list[OffloadKey] = []
        busy: list[OffloadKey] = []
        steps_left = 2 * (len(ahead) + len(passed)) + 2
        while len(victims) < n and steps_left:
            steps_left -= 1
            if not ahead:
                if not passed:
                    break
                ahead, passed = passed, ahead
            key, seen = ahead.popitem(last=False)
            if key in protected:
                passed[key] = seen
            elif blocks[key].ref_cnt:
                busy.append(key)
            elif seen:
                passed[key] = False
            else:
                victims.append(key)
        self._ahead, self._passed = ahead, passed
        parked = self._parked
        for key in busy:
            parked[key] = None
        if len(victims) < n:
            for key in reversed(victims):
                ahead[key] = False
                ahead.move_to_end(key, last=False)
            return None
        return victims

    @override
    def _clear_order(self) -> None:
        self._passed.clear()
        self._ahead.clear()
