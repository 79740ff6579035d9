"""S3-FIFO (Yang et al., SOSP'23): a small probation FIFO, a main FIFO and a ghost FIFO.

New blocks enter the small queue (10% of the capacity), or the main queue if the ghost
queue remembers them. Evicting from the small queue moves a block used since its insertion
to the main queue and drops the others into the ghost queue; evicting from the main
queue re-inserts a block whose 2-bit use counter is non-zero, decrementing it.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Sequence, Set
from itertools import islice

from typing_extensions import override

from kvcontract.contracts import OffloadKey
from kvcontract.policies.base import PolicyBase

__all__ = ["S3FIFOPolicy"]

_REF_CNT = operator.attrgetter("ref_cnt")
_SMALL_FRACTION = 0.1
_MAX_FREQ = 3


class S3FIFOPolicy(PolicyBase):
    """S3-FIFO over offload blocks; a touch of a block whose store is in flight is not a use.

    The eviction scan moves a used block as S3-FIFO does (small queue to main, or main
    queue to its tail for one use less) whether or not it could be evicted: moving is
    not evicting, and a block used by every request would otherwise sit at the front of
    its queue, protected each time, and slow every eviction. Unused blocks that cannot
    be evicted keep their place at the front of their queue: protected ones stay there,
    pinned ones are parked and return there. If ``evict`` returns ``None`` nothing has
    changed: the scan's moves are undone and what it parked is back in place.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._small: OrderedDict[OffloadKey, None] = OrderedDict()
        self._main: OrderedDict[OffloadKey, None] = OrderedDict()
        self._ghost: OrderedDict[OffloadKey, None] = OrderedDict()
        self._freq: dict[OffloadKey, int] = {}
        self._in_main: set[OffloadKey] = set()
        self._small_target = max(1, int(capacity * _SMALL_FRACTION))
        self._main_target = capacity - self._small_target
        self._ghost_limit = max(1, self._main_target)

    @property
    def queue_sizes(self) -> tuple[int, int, int]:
        """Blocks in the small and main queues, keys remembered by the ghost queue (parked excluded)."""
        return len(self._small), len(self._main), len(self._ghost)

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        freq, blocks, parked = self._freq, self._blocks, self._parked
        for key in keys:
            count = freq.get(key)
            if count is None:
                continue
            if count < _MAX_FREQ and blocks[key].ref_cnt >= 0:
                freq[key] = count + 1
            if key in parked and blocks[key].ref_cnt == 0:
                self._relink(key, parked.pop(key))

    @override
    def _place(self, key: OffloadKey) -> None:
        self._place_all((key,))

    @override
    def _place_all(self, keys: Sequence[OffloadKey]) -> None:
        """Put new ``keys`` in the small queue, or in the main one when the ghost queue remembers them."""
        freq, small, main, ghost = self._freq, self._small, self._main, self._ghost
        in_main = self._in_main
        for key in keys:
            freq[key] = 0
            if key in ghost:
                del ghost[key]
                main[key] = None
                in_main.add(key)
            else:
                small[key] = None

    def _unlink(self, key: OffloadKey) -> None:
        """Take ``key`` out of its queue."""
        if key in self._in_main:
            del self._main[key]
        else:
            del self._small[key]

    @override
    def _relink(self, key: OffloadKey, stamp: int) -> None:
        self._return_to(self._main if key in self._in_main else self._small, key, None, stamp)

    @override
    def _forget(self, key: OffloadKey, linked: bool) -> None:
        if linked:
            self._unlink(key)
        del self._freq[key]
        self._in_main.discard(key)

    @override
    def _select(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        small, main, freq, blocks = self._small, self._main, self._freq, self._blocks
        in_main, main_target = self._in_main, self._main_target
        if len(main) <= main_target:
            oldest = list(islice(small, n))
            if (
                len(oldest) == n
                and not any(map(freq.__getitem__, oldest))
                and protected.isdisjoint(oldest)
                and not any(map(_REF_CNT, map(blocks.__getitem__, oldest)))
            ):
                for _ in oldest:
                    small.popitem(last=False)
                self._drop_stamps(oldest)
                self._retire(oldest)
                return oldest
        front, stamp, parked = self._front, self._stamp, self._parked
        met: list[tuple[OffloadKey, bool, int, int]] = []
        """Every key the scan took from a queue front, in order: from the small queue?, old counter, stamp."""
        victims: list[OffloadKey] = []
        while len(victims) < n:
            if main and (len(main) > main_target or not small):
                from_small = False
                key, _none = main.popitem(last=False)
            elif small:
                from_small = True
                key, _none = small.popitem(last=False)
            else:
                break
            count, key_stamp = freq[key], stamp(key)
            met.append((key, from_small, count, key_stamp))
            if count:
                main[key] = None
                if from_small:
                    freq[key] = 0
                    in_main.add(key)
                else:
                    freq[key] = min(count, _MAX_FREQ) - 1
            elif key in protected:
                front[key] = key_stamp
            elif blocks[key].ref_cnt:
                parked[key] = key_stamp
            else:
                front[key] = key_stamp
                victims.append(key)
        if len(victims) < n:
            self._undo(met)
            return None
        chosen = set(victims)
        self._put_back([entry for entry in met if not entry[2] and entry[0] not in chosen and entry[0] not in parked])
        self._drop_stamps(victims)
        self._retire(victims)
        return victims

    @override
    def _clear_order(self) -> None:
        for ordered in (self._small, self._main, self._ghost):
            ordered.clear()
        self._freq.clear()
        self._in_main.clear()

    def _retire(self, victims: Sequence[OffloadKey]) -> None:
        """Drop the victims' counters; those evicted from the small queue join the ghost queue."""
        freq, in_main, ghost = self._freq, self._in_main, self._ghost
        for key in victims:
            del freq[key]
            if key in in_main:
                in_main.discard(key)
            else:
                ghost[key] = None
        for _ in range(len(ghost) - self._ghost_limit):
            ghost.popitem(last=False)

    def _put_back(self, met: Sequence[tuple[OffloadKey, bool, int, int]]) -> None:
        """Return unmoved keys taken from the queue fronts to the fronts, in their original order."""
        small, main = self._small, self._main
        for key, from_small, _count, _stamp in reversed(met):
            queue = small if from_small else main
            queue[key] = None
            queue.move_to_end(key, last=False)

    def _undo(self, met: Sequence[tuple[OffloadKey, bool, int, int]]) -> None:
        """Undo a failed scan: every key it took returns to its queue front with its counter, unparked.

        Undoing in reverse order finds each moved key where its move left it, so every key
        ends where the scan found it, stamped as the scan met it.
        """
        small, main, freq, in_main = self._small, self._main, self._freq, self._in_main
        front, parked = self._front, self._parked
        for key, from_small, count, stamp in reversed(met):
            if count:
                del main[key]
                freq[key] = count
                if from_small:
                    in_main.discard(key)
            else:
                parked.pop(key, None)
            queue = small if from_small else main
            queue[key] = None
            queue.move_to_end(key, last=False)
            front[key] = stamp
