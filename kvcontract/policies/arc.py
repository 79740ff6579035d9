"""Adaptive Replacement Cache (Megiddo and Modha, FAST'03): recency and frequency lists, self-tuning.

T1 holds blocks used once, T2 blocks used again; B1 and B2 remember the keys recently
evicted from each. A miss found in B1 grows the target size ``p`` of T1, one found in
B2 shrinks it, and eviction takes from T1 while T1 is larger than ``p``. The ghost lists
are bounded as in the paper: ``|T1| + |B1| <= capacity`` and ``|B1| + |B2| <= capacity``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator, Sequence, Set
from itertools import islice

from typing_extensions import override

from kvcontract.contracts import OffloadKey
from kvcontract.policies.base import PolicyBase

__all__ = ["ARCPolicy"]


class ARCPolicy(PolicyBase):
    """ARC over offload blocks; a touch of a block whose store is still in flight is not a reuse."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._t1: OrderedDict[OffloadKey, None] = OrderedDict()
        self._t2: OrderedDict[OffloadKey, None] = OrderedDict()
        self._b1: OrderedDict[OffloadKey, None] = OrderedDict()
        self._b2: OrderedDict[OffloadKey, None] = OrderedDict()
        self._parked_t2: set[OffloadKey] = set()
        """Parked blocks of T2 (the others parked are T1's): a list's own dict says who is in it."""
        self._parked_t1 = 0
        """Parked blocks of T1: they count in ``|T1|``, so a scan that parks one moves no target."""
        self._target_t1 = 0.0

    @property
    def target_t1(self) -> float:
        """The adaptive target size ``p`` of T1, in blocks."""
        return self._target_t1

    @property
    def ghost_sizes(self) -> tuple[int, int]:
        """How many keys B1 and B2 remember."""
        return len(self._b1), len(self._b2)

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        if self._parked or self._front:
            self._touch_with_parking(keys)
            return
        # Nothing parked or stamped (the usual case): the hot loop of a replay, one branch per key.
        t1, t2, blocks = self._t1, self._t2, self._blocks
        move_t1, move_t2, pop_t1 = t1.move_to_end, t2.move_to_end, t1.pop
        for key in reversed(keys):
            if key in t1:
                if blocks[key].ref_cnt < 0:
                    move_t1(key)
                else:
                    t2[key] = pop_t1(key)
            elif key in t2:
                move_t2(key)

    def _touch_with_parking(self, keys: Sequence[OffloadKey]) -> None:
        """``touch`` while blocks are parked or stamped: a touched parked block comes back, a stamp goes."""
        t1, t2, blocks = self._t1, self._t2, self._blocks
        front = self._front
        take_parked = self._take_parked if self._parked else None
        for key in reversed(keys):
            if key in t1:
                if blocks[key].ref_cnt < 0:
                    t1.move_to_end(key)
                else:
                    del t1[key]
                    t2[key] = None
            elif key in t2:
                t2.move_to_end(key)
            elif take_parked is not None and take_parked(key):
                if key in self._parked_t2:
                    self._parked_t2.discard(key)
                else:
                    self._parked_t1 -= 1
                    if blocks[key].ref_cnt < 0:
                        t1[key] = None
                        continue
                t2[key] = None
                continue
            else:
                continue
            if front:
                front.pop(key, None)

    @override
    def _place_all(self, keys: Sequence[OffloadKey]) -> None:
        """A batch no ghost list remembers goes to T1 at once, trimming B1 as ``_place`` would.

        ``_place`` drops B1's oldest key after each insert that leaves ``|T1| + |B1|`` over
        the capacity: none for the first ``-over`` keys when the sum starts below it, then
        one per key while B1 lasts.
        """
        b1, b2, t1 = self._b1, self._b2, self._t1
        if not (b1.keys().isdisjoint(keys) and b2.keys().isdisjoint(keys)):
            self._place_each(keys)
            return
        over = len(t1) + self._parked_t1 + len(b1) - self._capacity
        for key in keys:
            t1[key] = None
        drop_oldest = b1.popitem
        for _ in range(min(max(0, len(keys) + min(over, 0)), len(b1))):
            drop_oldest(False)  # positional: a keyword argument costs a third more per call

    def _place_each(self, keys: Sequence[OffloadKey]) -> None:
        """``_place`` for each of ``keys``, a ghost list remembering some: the others inline.

        Most keys of such a batch are new; filing them here rather than through ``_place``
        saves a call per key (measured in the note of the vLLM 0.34 issue's ARC cell).
        """
        b1, b2, t1 = self._b1, self._b2, self._t1
        capacity, place = self._capacity, self._place
        for key in keys:
            if key in b1 or key in b2:
                place(key)
            else:
                t1[key] = None
                if b1 and len(t1) + self._parked_t1 + len(b1) > capacity:
                    b1.popitem(False)  # positional: a keyword argument costs a third more per call

    @override
    def _place(self, key: OffloadKey) -> None:
        """Put new ``key`` in T1, or in T2 when a ghost list remembers it (moving the target)."""
        b1, b2 = self._b1, self._b2
        if key in b1:
            self._target_t1 = min(float(self._capacity), self._target_t1 + max(1.0, len(b2) / len(b1)))
            del b1[key]
            self._t2[key] = None
        elif key in b2:
            self._target_t1 = max(0.0, self._target_t1 - max(1.0, len(b1) / len(b2)))
            del b2[key]
            self._t2[key] = None
        else:
            self._t1[key] = None
            if len(b1) and len(self._t1) + self._parked_t1 + len(b1) > self._capacity:
                b1.popitem(last=False)

    def _unlink(self, key: OffloadKey) -> None:
        """Take ``key`` out of its queue."""
        if key in self._t2:
            del self._t2[key]
            self._parked_t2.add(key)
        else:
            del self._t1[key]
            self._parked_t1 += 1

    @override
    def _relink(self, key: OffloadKey, stamp: int) -> None:
        if key in self._parked_t2:
            self._parked_t2.discard(key)
            self._return_to(self._t2, key, None, stamp)
        else:
            self._return_to(self._t1, key, None, stamp)
            self._parked_t1 -= 1

    @override
    def _forget(self, key: OffloadKey, linked: bool) -> None:
        if linked:
            if key in self._t1:
                del self._t1[key]
            else:
                del self._t2[key]
        elif key in self._parked_t2:
            self._parked_t2.discard(key)
        else:
            self._parked_t1 -= 1

    @override
    def _select(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        t1, t2 = self._t1, self._t2
        t1_size = len(t1) + self._parked_t1
        t1_share = min(n, max(0, t1_size - math.floor(self._target_t1)))
        oldest = list(islice(t1, t1_share)) + list(islice(t2, n - t1_share))
        if len(oldest) == n and protected.isdisjoint(oldest):
            blocks = self._blocks
            for victim in oldest:
                if blocks[victim].ref_cnt:
                    break
            else:  # the oldest n are all evictable: no scan needed
                self._retire(oldest[:t1_share], oldest[t1_share:])
                return oldest
        in_t1, in_t2 = iter(t1), iter(t2)
        from_t1: list[OffloadKey] = []
        from_t2: list[OffloadKey] = []
        busy: list[tuple[OffloadKey, int]] = []
        t1_left = t1_size
        target = self._target_t1
        while len(from_t1) + len(from_t2) < n:
            if t1_left > target:
                key = self._next_candidate(in_t1, protected, busy)
                if key is not None:
                    from_t1.append(key)
                    t1_left -= 1
                    continue
                key = self._next_candidate(in_t2, protected, busy)
                if key is None:
                    break
                from_t2.append(key)
            else:
                key = self._next_candidate(in_t2, protected, busy)
                if key is not None:
                    from_t2.append(key)
                    continue
                key = self._next_candidate(in_t1, protected, busy)
                if key is None:
                    break
                from_t1.append(key)
                t1_left -= 1
        if len(from_t1) + len(from_t2) < n:
            self._front.update(busy)
            return None
        parked = self._parked
        for key, stamp in busy:
            self._unlink(key)
            parked[key] = stamp
        self._retire(from_t1, from_t2)
        return from_t1 + from_t2

    @override
    def _clear_order(self) -> None:
        for ordered in (self._t1, self._t2, self._b1, self._b2):
            ordered.clear()
        self._parked_t2.clear()
        self._parked_t1 = 0
        self._target_t1 = 0.0

    def _next_candidate(
        self,
        keys: Iterator[OffloadKey],
        protected: Set[OffloadKey],
        busy: list[tuple[OffloadKey, int]],
    ) -> OffloadKey | None:
        """The next evictable, unprotected key of ``keys``; non-evictable ones go to ``busy`` with their stamps.

        Stamps every key it meets, in meeting order (see ``PolicyBase._select``).
        """
        blocks, front, stamp = self._blocks, self._front, self._stamp
        for key in keys:
            if key in protected:
                front[key] = stamp(key)
            elif blocks[key].ref_cnt:
                busy.append((key, stamp(key)))
            else:
                front[key] = stamp(key)
                return key
        return None

    def _retire(self, from_t1: Sequence[OffloadKey], from_t2: Sequence[OffloadKey]) -> None:
        """Move the victims out of T1 and T2 into the ghost lists B1 and B2."""
        t1, t2, b1, b2 = self._t1, self._t2, self._b1, self._b2
        for key in from_t1:
            del t1[key]
            b1[key] = None
        for key in from_t2:
            del t2[key]
            b2[key] = None
        if self._front:
            self._drop_stamps(from_t1)
            self._drop_stamps(from_t2)
        self._trim_ghosts()

    def _trim_ghosts(self) -> None:
        b1, b2, capacity = self._b1, self._b2, self._capacity
        excess = len(self._t1) + self._parked_t1 + len(b1) - capacity
        drop_oldest = b1.popitem
        for _ in range(min(excess, len(b1))):
            drop_oldest(False)  # positional: a keyword argument costs a third more per call
        excess = len(b1) + len(b2) - capacity
        drop_oldest = b2.popitem
        for _ in range(min(excess, len(b2))):
            drop_oldest(False)
