"""The block table and the parking of non-evictable blocks, shared by the built-in policies.

A policy keeps its eviction candidates in its own order structures. A block met there
while pinned (``ref_cnt > 0``) or in flight (``ref_cnt == -1``) is parked: taken out of
the order, metadata kept, so no later eviction scans it again. Only a scan that
succeeds parks: one that fails changes nothing. A parked block comes back when
``mark_evictable`` says so, through an incremental re-check (one parked block per block
evicted), or through a full re-check when an eviction would otherwise fail, and then
takes the place it left; a touch brings it back as most recently used (LRU, ARC,
prefix_reuse), since that touch is its last use. ``mark_non_evictable``
is not needed (the first scan to meet the block parks it) and is ignored, so only
scans park.

Places are kept without stamping every use: a scan walks a queue from its least recent
end, so every block it meets is older than every block it has not met. The scan gives
each block it meets a scan stamp in meeting order (victims drop theirs); the stamped
blocks stay a prefix of their queue until a touch moves them away, so a returning
block goes after the stamped blocks older than it and before everything else
(``_return_to``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Mapping, Sequence, Set
from typing import NoReturn, TypeVar

from typing_extensions import override

from kvcontract.contracts import BlockStatus, CachePolicy, OffloadKey

__all__ = ["PolicyBase"]

_V = TypeVar("_V")


class PolicyBase(CachePolicy):
    """Holds the blocks and parks those found non-evictable; subclasses order the rest.

    Subclasses implement ``touch`` and the order hooks (``_place``, ``_forget``,
    ``_select``, ``_clear_order``, and ``_relink`` if their scans park), and may override
    ``_place_all`` to file a batch in one pass. ``evict`` is atomic: ``None`` leaves the
    set of blocks and their statuses as they were.
    """

    def __init__(self, capacity: int) -> None:
        if type(capacity) is not int or capacity < 1:
            raise ValueError(f"{type(self).__name__}: capacity must be a positive number of blocks, got {capacity!r}")
        self._capacity = capacity
        self._blocks: dict[OffloadKey, BlockStatus] = {}
        self._parked: OrderedDict[OffloadKey, int] = OrderedDict()
        """Parked keys, oldest parking first, each with its scan stamp."""
        self._front: dict[OffloadKey, int] = {}
        """Keys a scan left at the front of their queue (or returned there), with their scan stamps."""
        self._scan_clock = 0

    @property
    def capacity(self) -> int:
        """The most blocks this policy holds."""
        return self._capacity

    @property
    def blocks(self) -> Mapping[OffloadKey, BlockStatus]:
        """The blocks held, by key: a live read-only view, which the CPU manager reads as its block table."""
        return self._blocks

    @override
    def get(self, key: OffloadKey) -> BlockStatus | None:
        return self._blocks.get(key)

    @override
    def insert(self, key: OffloadKey, block: BlockStatus) -> None:
        blocks = self._blocks
        if key in blocks or len(blocks) >= self._capacity:
            self._refuse_insert("insert", key)
        blocks[key] = block
        self._place(key)

    @override
    def insert_many(self, keys: Sequence[OffloadKey], blocks: Sequence[BlockStatus]) -> None:
        self._admit(keys, blocks)
        self._place_all(keys)

    @override
    def remove(self, key: OffloadKey) -> None:
        if self._blocks.pop(key, None) is None:
            return
        if self._parked.pop(key, None) is not None:
            self._forget(key, linked=False)
        else:
            self._front.pop(key, None)
            self._forget(key, linked=True)

    @override
    def evict(self, n: int, protected: Set[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        if n <= 0:
            if n < 0:
                raise ValueError(f"{type(self).__name__}.evict: n must be >= 0, got {n}")
            return []
        if self._parked:
            self._recheck_parked(n)
        if n > self._linked_candidates(n, protected):
            self._recheck_parked(len(self._parked))
            if n > self._linked_candidates(n, protected):
                return None
        victims = self._select(n, protected)
        if victims is None:
            self._recheck_parked(len(self._parked))
            victims = self._select(n, protected)
            if victims is None:
                return None
        return list(zip(victims, map(self._blocks.pop, victims)))

    @override
    def clear(self) -> None:
        self._blocks.clear()
        self._parked.clear()
        self._front.clear()
        self._clear_order()

    @override
    def mark_evictable(self, key: OffloadKey) -> None:
        block = self._blocks.get(key)
        if block is not None and block.ref_cnt == 0 and key in self._parked:
            self._relink(key, self._parked.pop(key))

    @override
    def __len__(self) -> int:
        return len(self._blocks)

    @override
    def __repr__(self) -> str:
        return f"{type(self).__name__}(capacity={self._capacity}, held={len(self._blocks)}, parked={len(self._parked)})"

    def _linked_candidates(self, n: int, protected: Set[OffloadKey]) -> int:
        """Blocks in the order that ``protected`` does not name: an upper bound of the victims."""
        linked = len(self._blocks) - len(self._parked)
        if linked - len(protected) >= n:
            return linked - len(protected)
        blocks, parked = self._blocks, self._parked
        return linked - sum(1 for key in protected if key in blocks and key not in parked)

    def _refuse_insert(self, method: str, key: OffloadKey) -> NoReturn:
        """Raise the error ``method`` owes for ``key``: already held, or the policy is full."""
        where = f"{type(self).__name__}.{method}"
        if key in self._blocks:
            raise ValueError(f"{where}: {key!r} is already held; remove it first")
        raise ValueError(f"{where}: full ({self._capacity} blocks); evict before inserting")

    def _admit(self, keys: Sequence[OffloadKey], blocks: Sequence[BlockStatus]) -> None:
        """Add a batch of ``insert_many`` to the block table, or raise having changed nothing."""
        held = self._blocks
        before = len(held)
        if len(keys) != len(blocks):
            raise ValueError(
                f"{type(self).__name__}.insert_many: {len(keys)} keys but {len(blocks)} blocks; pass one block per key"
            )
        if before + len(keys) > self._capacity or not held.keys().isdisjoint(keys):
            self._refuse_insert("insert_many", next((key for key in keys if key in held), keys[0]))
        held.update(zip(keys, blocks))
        if len(held) != before + len(keys):
            for key in keys:
                held.pop(key, None)
            raise ValueError(f"{type(self).__name__}.insert_many: a key appears twice in the batch; pass distinct keys")

    def _stamp(self, key: OffloadKey) -> int:
        """The scan stamp of ``key``, met by a scan now: its old one if it has one, else the next."""
        stamp = self._front.pop(key, None)
        if stamp is None:
            stamp = self._scan_clock
            self._scan_clock = stamp + 1
        return stamp

    def _drop_stamps(self, keys: Sequence[OffloadKey]) -> None:
        """Forget the scan stamps of ``keys``, which leave the front of their queue."""
        front = self._front
        if front:
            for key in keys:
                front.pop(key, None)

    def _return_to(self, queue: OrderedDict[OffloadKey, _V], key: OffloadKey, value: _V, stamp: int) -> None:
        """Put ``key`` back into ``queue`` after the stamped keys older than it, before all others.

        Costs one step per older stamped key still held in ``queue``: blocks a scan left
        at the front and no touch has moved since.
        """
        front = self._front
        older: list[OffloadKey] = []
        for other in queue:
            other_stamp = front.get(other)
            if other_stamp is None or other_stamp > stamp:
                break
            older.append(other)
        queue[key] = value
        queue.move_to_end(key, last=False)
        for other in reversed(older):
            queue.move_to_end(other, last=False)
        front[key] = stamp

    def _take_parked(self, key: OffloadKey) -> bool:
        """Unpark ``key`` as it is touched (the caller puts it at the recent end); ``False`` if not parked."""
        return self._parked.pop(key, None) is not None

    def _recheck_parked(self, count: int) -> None:
        """Re-check up to ``count`` parked blocks, oldest parking first; the evictable ones return to their place."""
        parked, blocks = self._parked, self._blocks
        for _ in range(min(count, len(parked))):
            key, stamp = parked.popitem(last=False)
            if blocks[key].ref_cnt == 0:
                self._relink(key, stamp)
            else:
                parked[key] = stamp

    @abstractmethod
    def _place(self, key: OffloadKey) -> None:
        """Put ``key``, just inserted (its block already in ``_blocks``), in the order."""

    def _place_all(self, keys: Sequence[OffloadKey]) -> None:
        """Put ``keys``, just inserted together, in the order; by default ``_place`` for each."""
        place = self._place
        for key in keys:
            place(key)

    def _relink(self, key: OffloadKey, stamp: int) -> None:
        """Return parked ``key``, evictable again, to the place it left (``_return_to`` with ``stamp``).

        Policies whose scans park blocks override it; the others never reach it.
        """
        raise NotImplementedError(f"{type(self).__name__} parks no blocks, so none returns")

    @abstractmethod
    def _forget(self, key: OffloadKey, linked: bool) -> None:
        """Drop removed ``key``'s metadata, and its place in the order if ``linked``."""

    @abstractmethod
    def _select(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        """Take ``n`` evictable, unprotected victims out of the order and drop their metadata.

        Parks the non-evictable blocks it meets and stamps every other block it meets
        (``_stamp``), in meeting order, then drops the stamps of its victims: what it
        leaves in the order is then a stamped prefix of its queue. If it finds fewer than ``n``, it puts back what it took
        and returns ``None``.
        """

    @abstractmethod
    def _clear_order(self) -> None:
        """Drop the order and every block's metadata."""
