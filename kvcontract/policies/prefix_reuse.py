"""Prefix-aware eviction by reuse class: chains lose their tails first, reused prefixes stay longest.

In a prefix cache a block is only useful while every earlier block of its prefix is
kept, and a block reused before is far likelier to be reused again than a new one.
This policy remembers how often each recently seen key was used (a history of
``history_factor`` times the capacity) and files every held block into a class by that
count: 0 (never reused), 1, 2, 3 or more. Each class is a recency order in which a
request's touch leaves its first key most recent, so chains are cut from their tails.
The victim is the class head with the smallest ``last use + bonus[class]``, where the
bonus is a multiple of the measured mean reuse distance: reused blocks get extra time
in proportion to how long reuse takes on this workload. Time is counted in touched
keys. A parent is touched whenever its children are, so its class and last use are
never below theirs, and it is not evicted before them.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Sequence, Set
from itertools import islice, repeat

from typing_extensions import override

from kvcontract.contracts import OffloadKey
from kvcontract.policies.base import PolicyBase

__all__ = ["PrefixReusePolicy"]

_DEFAULT_BONUS = (0.0, 1.5, 2.0, 2.5)
_NEVER = -1
"""Last use of a block not yet used since it was stored (its first touch is not a reuse)."""
_CLASS_BITS = 3
_CLASS_MASK = (1 << _CLASS_BITS) - 1
_CLASSES = 1 << _CLASS_BITS
_NONE_LEFT = float("inf")
_ABSENT = -2
"""What popping a key from a queue that does not hold it gives (last uses are >= -1)."""
_KEY = operator.itemgetter(0)
_VALUE = operator.itemgetter(1)
_REF_CNT = operator.attrgetter("ref_cnt")
_VICTIM, _ASIDE, _BUSY = 0, 1, 2
"""What a scan did with a key it took: evicted it, set it aside (protected), parked it."""


class PrefixReusePolicy(PolicyBase):
    """Reuse classes with an adaptive age bonus, recency order within a class, tails first.

    ``bonus[c]`` multiplies the mean reuse distance to give class ``c`` its extra time;
    the last class takes every count from ``len(bonus) - 1`` up. ``smoothing`` is the
    weight of one new reuse distance in the running mean. Held keys carry their class
    and last use; keys not held (evicted, or seen but never stored) are remembered in a
    two-generation history that holds between ``history_factor / 2`` and
    ``history_factor`` times the capacity of the most recently seen keys.
    """

    def __init__(
        self,
        capacity: int,
        *,
        history_factor: int = 8,
        bonus: Sequence[float] = _DEFAULT_BONUS,
        smoothing: float = 0.001,
    ) -> None:
        super().__init__(capacity)
        if history_factor < 2:
            raise ValueError(f"history_factor must be >= 2, got {history_factor}")
        if not 2 <= len(bonus) <= _CLASSES or any(b < 0 for b in bonus) or list(bonus) != sorted(bonus):
            raise ValueError(f"bonus must hold 2 to {_CLASSES} non-negative, non-decreasing factors, got {list(bonus)}")
        if not 0.0 < smoothing < 1.0:
            raise ValueError(f"smoothing must be in (0, 1), got {smoothing}")
        self._factors = tuple(float(b) for b in bonus)
        self._top = len(bonus) - 1
        self._keep = 1.0 - smoothing
        self._generation_size = history_factor * capacity // 2
        self._queues: list[OrderedDict[OffloadKey, int]] = [OrderedDict() for _ in bonus]
        """Per class, held keys in recency order, each with its last use; a key's queue is its class."""
        self._parked_use: dict[OffloadKey, int] = {}
        """Parked keys, which are in no queue: ``last use << 3 | class``."""
        self._recent: dict[OffloadKey, int] = {}
        self._older: dict[OffloadKey, int] = {}
        """History generations: key not held -> ``last use << 3 | class``."""
        self._clock = 0
        self._reuse_distance = float(capacity)
        self._bonus = [f * self._reuse_distance for f in self._factors]

    @property
    def reuse_distance(self) -> float:
        """The running mean distance between two uses of a key, in touched keys."""
        return self._reuse_distance

    def reuse_class(self, key: OffloadKey) -> int | None:
        """The class of held ``key`` (its use count, capped), or ``None`` if not held."""
        parked = self._parked_use.get(key)
        if parked is not None:
            return parked & _CLASS_MASK
        return next((level for level, queue in enumerate(self._queues) if key in queue), None)

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        queues = self._queues
        fresh = queues[0]
        promoted = queues[1]
        now = self._clock = self._clock + len(keys)
        distances = reuses = 0
        for key in reversed(keys):
            last = fresh.pop(key, _ABSENT)
            if last is _ABSENT:
                distances, reuses = self._touch_elsewhere(key, distances, reuses)
            elif last == _NEVER:
                fresh[key] = now
            else:
                distances += now - last
                reuses += 1
                promoted[key] = now
        front = self._front
        if front:
            for key in keys:
                front.pop(key, None)
        if reuses:
            kept = self._keep**reuses
            mean = self._reuse_distance * kept + distances / reuses * (1.0 - kept)
            self._reuse_distance = mean
            self._bonus = [f * mean for f in self._factors]

    @override
    def _place(self, key: OffloadKey) -> None:
        self._place_all((key,))

    @override
    def _place_all(self, keys: Sequence[OffloadKey]) -> None:
        """File new ``keys`` under the class and last use the history remembers, or as never used."""
        queues, recent, older = self._queues, self._recent, self._older
        fresh = queues[0]
        for key in keys:
            past = recent.pop(key, None)
            if past is None:
                past = older.get(key)
            if past is None:
                fresh[key] = _NEVER
            else:
                queues[past & _CLASS_MASK][key] = past >> _CLASS_BITS

    def _unlink(self, key: OffloadKey) -> None:
        """Take ``key`` out of its queue, keeping its last use and class in ``_parked_use``."""
        for level, queue in enumerate(self._queues):
            last = queue.pop(key, _ABSENT)
            if last is not _ABSENT:
                self._parked_use[key] = last << _CLASS_BITS | level
                return

    @override
    def _relink(self, key: OffloadKey, stamp: int) -> None:
        packed = self._parked_use.pop(key)
        self._return_to(self._queues[packed & _CLASS_MASK], key, packed >> _CLASS_BITS, stamp)

    @override
    def _forget(self, key: OffloadKey, linked: bool) -> None:
        if linked:
            self._unlink(key)
        packed = self._parked_use.pop(key)
        last = packed >> _CLASS_BITS
        if last == _NEVER:
            packed = self._clock << _CLASS_BITS | packed & _CLASS_MASK
        self._record(key, packed)

    @override
    def _select(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        """Take the best class head ``n`` times; a protected or non-evictable head is set aside or parked.

        Ties in ``last use + bonus`` go to the lower class. Every key taken from a queue
        is in ``met``, in order, so a failed scan can put all back and the keys left in
        the queues get their scan stamps in meeting order.
        """
        queues, bonus, blocks = self._queues, self._bonus, self._blocks
        met: list[tuple[OffloadKey, int, int, int]] = []
        """Keys taken from the queue fronts, in order: key, last use, class, what became of it."""
        need, batched = n, True
        while need:
            best, best_priority, runner_up, runner_level = -1, _NONE_LEFT, _NONE_LEFT, -1
            for level, queue in enumerate(queues):
                if queue:
                    priority = next(iter(queue.values())) + bonus[level]
                    if priority < best_priority:
                        best, best_priority, runner_up, runner_level = level, priority, best_priority, best
                    elif priority < runner_up:
                        runner_up, runner_level = priority, level
            if best < 0:
                break
            queue, best_bonus = queues[best], bonus[best]
            if batched:
                run = list(islice(queue.items(), need))
                run_keys = list(map(_KEY, run))
                top = max(map(_VALUE, run)) + best_bonus
                if (
                    (top < runner_up or (top == runner_up and best < runner_level))
                    and protected.isdisjoint(run_keys)
                    and not any(map(_REF_CNT, map(blocks.__getitem__, run_keys)))
                ):
                    for _ in run:
                        queue.popitem(last=False)
                    met += zip(run_keys, map(_VALUE, run), repeat(best), repeat(_VICTIM))
                    need -= len(run)
                    continue
                batched = False
            taken = 0
            for key, last in queue.items():
                priority = last + best_bonus
                if (
                    taken == need
                    or key in protected
                    or blocks[key].ref_cnt
                    or not (priority < runner_up or (priority == runner_up and best < runner_level))
                ):
                    break
                met.append((key, last, best, _VICTIM))
                taken += 1
            if taken:
                for _ in range(taken):
                    queue.popitem(last=False)
                need -= taken
                continue
            key, last = queue.popitem(last=False)
            met.append((key, last, best, _ASIDE if key in protected else _BUSY))
        if need:
            self._put_back(met)
            self._stamp_all([entry[0] for entry in met])
            return None
        if len(met) > n:
            self._settle([entry for entry in met if entry[3] != _VICTIM])
            met = [entry for entry in met if entry[3] == _VICTIM]
        victims = list(map(_KEY, met))
        self._drop_stamps(victims)
        self._remember(met)
        return victims

    @override
    def _clear_order(self) -> None:
        for queue in self._queues:
            queue.clear()
        self._parked_use.clear()
        self._recent.clear()
        self._older.clear()
        self._clock = 0
        self._reuse_distance = float(self._capacity)
        self._bonus = [f * self._reuse_distance for f in self._factors]

    def _touch_elsewhere(self, key: OffloadKey, distances: int, reuses: int) -> tuple[int, int]:
        """Touch ``key``, which is not in the first class's queue; returns the updated sums."""
        now, top, queues = self._clock, self._top, self._queues
        for level in range(1, top + 1):
            queue = queues[level]
            last = queue.pop(key, _ABSENT)
            if last is not _ABSENT:
                queues[min(level + 1, top) if last != _NEVER else level][key] = now
                if last == _NEVER:
                    return distances, reuses
                return distances + now - last, reuses + 1
        packed = self._parked_use.get(key)
        if packed is not None:
            self._touch_parked(key, packed)
            return distances, reuses
        past = self._recent.get(key)
        if past is None:
            past = self._older.get(key)
        if past is None:
            self._record(key, now << _CLASS_BITS)
            return distances, reuses
        level = min((past & _CLASS_MASK) + 1, top)
        self._record(key, now << _CLASS_BITS | level)
        return distances + now - (past >> _CLASS_BITS), reuses + 1

    def _touch_parked(self, key: OffloadKey, packed: int) -> None:
        """Count a use of parked ``key``, which rejoins its queue as most recent: this touch is its last use."""
        last, level = packed >> _CLASS_BITS, packed & _CLASS_MASK
        if last != _NEVER:
            level = min(level + 1, self._top)
            self._fold_distance(self._clock - last)
        del self._parked_use[key]
        self._take_parked(key)
        self._queues[level][key] = self._clock

    def _fold_distance(self, distance: int) -> None:
        """Fold one reuse distance into the running mean and the bonuses."""
        mean = self._reuse_distance * self._keep + distance * (1.0 - self._keep)
        self._reuse_distance = mean
        self._bonus = [f * mean for f in self._factors]

    def _remember(self, victims: Sequence[tuple[OffloadKey, int, int, int]]) -> None:
        """Move the victims (key, last use, class, fate) to the history, with their last uses and classes."""
        now = self._clock
        recent = self._recent
        for key, last, level, _fate in victims:
            recent[key] = (now if last == _NEVER else last) << _CLASS_BITS | level
        if len(recent) >= self._generation_size:
            self._older, self._recent = recent, {}

    def _record(self, key: OffloadKey, entry: int) -> None:
        """Remember ``entry`` (last use and class) for ``key``, which is not held."""
        recent = self._recent
        recent[key] = entry
        if len(recent) >= self._generation_size:
            self._older, self._recent = recent, {}

    def _put_back(self, taken: Sequence[tuple[OffloadKey, int, int, int]]) -> None:
        """Return keys taken from the queue fronts to the fronts, in their original order per queue."""
        queues = self._queues
        for key, last, level, _fate in reversed(taken):
            queue = queues[level]
            queue[key] = last
            queue.move_to_end(key, last=False)

    def _stamp_all(self, keys: Sequence[OffloadKey]) -> None:
        """Stamp ``keys``, met by a scan in this order and left at their queue fronts."""
        front, stamp = self._front, self._stamp
        for key in keys:
            front[key] = stamp(key)

    def _settle(self, kept: Sequence[tuple[OffloadKey, int, int, int]]) -> None:
        """After a successful scan: protected keys go back to their fronts, busy ones are parked, all stamped in order."""
        self._put_back([entry for entry in kept if entry[3] == _ASIDE])
        front, stamp, parked, parked_use = self._front, self._stamp, self._parked, self._parked_use
        for key, last, level, fate in kept:
            if fate == _ASIDE:
                front[key] = stamp(key)
            else:
                parked[key] = stamp(key)
                parked_use[key] = last << _CLASS_BITS | level
