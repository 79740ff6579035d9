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
    A block keeps its place in the queue whatever happens to it, so nothing is parked:
    the hand passes over a pinned or in-flight block as over an evictable one (clearing
    its visited bit) but does not evict it, and passes over a protected block leaving its
    bit set. Passing costs one step per block per lap, so a pinned block is not
    scanned again before the hand comes round. If ``evict`` returns ``None`` nothing
    has changed: the hand and the bits it cleared are restored.
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
        ahead, passed, blocks = self._ahead, self._passed, self._blocks
        for key in keys:
            if key in ahead:
                if blocks[key].ref_cnt >= 0:
                    ahead[key] = True
            elif key in passed and blocks[key].ref_cnt >= 0:
                passed[key] = True

    @override
    def _place(self, key: OffloadKey) -> None:
        self._ahead[key] = False

    @override
    def _place_all(self, keys: Sequence[OffloadKey]) -> None:
        ahead = self._ahead
        for key in keys:
            ahead[key] = False

    @override
    def _forget(self, key: OffloadKey, linked: bool) -> None:
        if key in self._ahead:
            del self._ahead[key]
        else:
            del self._passed[key]

    @override
    def _select(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        ahead, passed, blocks = self._ahead, self._passed, self._blocks
        victims: list[OffloadKey] = []
        swept: list[tuple[OffloadKey, bool] | None] = []
        """The hand's steps, to undo a failed sweep: a key and its bit, or ``None`` for a wrap."""
        steps_left = 2 * (len(ahead) + len(passed)) + 2
        while len(victims) < n and steps_left:
            steps_left -= 1
            if not ahead:
                if not passed:
                    break
                ahead, passed = passed, ahead
                swept.append(None)
            key, seen = ahead.popitem(last=False)
            swept.append((key, seen))
            if key in protected:
                passed[key] = seen
            elif seen or blocks[key].ref_cnt:
                passed[key] = False
            else:
                victims.append(key)
        if len(victims) < n:
            for step in reversed(swept):
                if step is None:
                    ahead, passed = passed, ahead
                    continue
                key, seen = step
                passed.pop(key, None)
                ahead[key] = seen
                ahead.move_to_end(key, last=False)
            victims = []
        self._ahead, self._passed = ahead, passed
        return victims or None

    @override
    def _clear_order(self) -> None:
        self._passed.clear()
        self._ahead.clear()
