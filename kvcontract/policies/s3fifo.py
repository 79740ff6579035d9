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
    be evicted (protected, pinned) keep their place at the front of their queue. If
    ``evict`` returns ``None`` the blocks it took are back where they were, though some
    promotions it made along the way remain, as in a partial eviction scan.
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
            if key in parked:
                self._unpark_if_ready(key)

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

    @override
    def _unlink(self, key: OffloadKey) -> None:
        if key in self._in_main:
            del self._main[key]
        else:
            del self._small[key]

    @override
    def _relink(self, key: OffloadKey) -> None:
        if key in self._in_main:
            self._main[key] = None
        else:
            self._small[key] = None

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
                self._retire(oldest)
                return oldest
        taken: list[tuple[OffloadKey, bool]] = []
        victims: list[OffloadKey] = []
        busy: list[OffloadKey] = []
        while len(victims) < n:
            if main and (len(main) > main_target or not small):
                key, _none = main.popitem(last=False)
                if freq[key]:
                    freq[key] = min(freq[key], _MAX_FREQ) - 1
                    main[key] = None
                elif key in protected:
                    taken.append((key, False))
                elif blocks[key].ref_cnt:
                    busy.append(key)
                else:
                    taken.append((key, False))
                    victims.append(key)
            elif small:
                key, _none = small.popitem(last=False)
                if freq[key]:
                    freq[key] = 0
                    main[key] = None
                    in_main.add(key)
                elif key in protected:
                    taken.append((key, True))
                elif blocks[key].ref_cnt:
                    busy.append(key)
                else:
                    taken.append((key, True))
                    victims.append(key)
            else:
                break
        parked = self._parked
        for key in busy:
            parked[key] = None
        if len(victims) < n:
            self._put_back(taken)
            return None
        chosen = set(victims)
        self._put_back([entry for entry in taken if entry[0] not in chosen])
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

    def _put_back(self, taken: list[tuple[OffloadKey, bool]]) -> None:
        """Return keys taken from the queue fronts to the fronts, in their original order."""
        small, main = self._small, self._main
        for key, from_small in reversed(taken):
            queue = small if from_small else main
            queue[key] = None
            queue.move_to_end(key, last=False)
