"""The block table and the parking of non-evictable blocks, shared by the built-in policies.

A policy keeps its eviction candidates in its own order structures. A block met there
while pinned (``ref_cnt > 0``) or in flight (``ref_cnt == -1``) is parked: taken out of
the order, metadata kept, so no later eviction scans it again. It comes back when
``mark_evictable`` says so, when it is touched while evictable, through an incremental
re-check (one parked block per block evicted), or through a full re-check when an
eviction would otherwise fail. Callers may send the ``mark_*`` hints but need not.
"""

from __future__ import annotations

from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Sequence, Set
from typing import NoReturn

from typing_extensions import override

from kvcontract.contracts import BlockStatus, CachePolicy, OffloadKey

__all__ = ["PolicyBase"]


class PolicyBase(CachePolicy):
    """Holds the blocks and parks those found non-evictable; subclasses order the rest.

    Subclasses implement ``touch`` and the order hooks (``_place``, ``_unlink``,
    ``_relink``, ``_forget``, ``_select``, ``_clear_order``), and may override
    ``_place_all`` to file a batch in one pass. ``evict`` is atomic: ``None`` leaves the
    set of blocks and their statuses as they were.
    """

    def __init__(self, capacity: int) -> None:
        if type(capacity) is not int or capacity < 1:
            raise ValueError(
                f"{type(self).__name__}: capacity must be a positive number of blocks, "
                f"got {capacity!r}"
            )
        self._capacity = capacity
        self._blocks: dict[OffloadKey, BlockStatus] = {}
        self._parked: OrderedDict[OffloadKey, None] = OrderedDict()

    @property
    def capacity(self) -> int:
        """The most blocks this policy holds."""
        return self._capacity

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
        if key in self._parked:
            del self._parked[key]
            self._forget(key, linked=False)
        else:
            self._forget(key, linked=True)

    @override
    def evict(
        self, n: int, protected: Set[OffloadKey]
    ) -> list[tuple[OffloadKey, BlockStatus]] | None:
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
        self._clear_order()

    @override
    def mark_evictable(self, key: OffloadKey) -> None:
        block = self._blocks.get(key)
        if block is not None and block.ref_cnt == 0 and key in self._parked:
            del self._parked[key]
            self._relink(key)

    @override
    def mark_non_evictable(self, key: OffloadKey) -> None:
        if key in self._blocks and key not in self._parked:
            self._unlink(key)
            self._parked[key] = None

    @override
    def __len__(self) -> int:
        return len(self._blocks)

    @override
    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(capacity={self._capacity}, held={len(self._blocks)}, "
            f"parked={len(self._parked)})"
        )

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
                f"{type(self).__name__}.insert_many: {len(keys)} keys but {len(blocks)} "
                "blocks; pass one block per key"
            )
        if before + len(keys) > self._capacity or not held.keys().isdisjoint(keys):
            self._refuse_insert("insert_many", next((key for key in keys if key in held), keys[0]))
        for key, block in zip(keys, blocks):
            held[key] = block
        if len(held) != before + len(keys):
            for key in keys:
                held.pop(key, None)
            raise ValueError(
                f"{type(self).__name__}.insert_many: a key appears twice in the batch; "
                "pass distinct keys"
            )

    def _park_all(self, keys: Sequence[OffloadKey]) -> None:
        """Take ``keys``, found non-evictable in the order, out of it."""
        for key in keys:
            self._unlink(key)
            self._parked[key] = None

    def _unpark_if_ready(self, key: OffloadKey) -> None:
        """Return parked ``key`` to the order as most recent if it is evictable now."""
        if self._blocks[key].ref_cnt == 0:
            del self._parked[key]
            self._relink(key)

    def _recheck_parked(self, count: int) -> None:
        """Re-check up to ``count`` parked blocks, oldest first; the evictable ones rejoin the order."""
        parked, blocks = self._parked, self._blocks
        for _ in range(min(count, len(parked))):
            key, _none = parked.popitem(last=False)
            if blocks[key].ref_cnt == 0:
                self._relink(key)
            else:
                parked[key] = None

    @abstractmethod
    def _place(self, key: OffloadKey) -> None:
        """Put ``key``, just inserted (its block already in ``_blocks``), in the order."""

    def _place_all(self, keys: Sequence[OffloadKey]) -> None:
        """Put ``keys``, just inserted together, in the order; by default ``_place`` for each."""
        place = self._place
        for key in keys:
            place(key)

    @abstractmethod
    def _unlink(self, key: OffloadKey) -> None:
        """Take linked ``key`` out of the order, keeping its metadata (it is being parked)."""

    @abstractmethod
    def _relink(self, key: OffloadKey) -> None:
        """Return parked ``key`` to the order as most recently used."""

    @abstractmethod
    def _forget(self, key: OffloadKey, linked: bool) -> None:
        """Drop removed ``key``'s metadata, and its place in the order if ``linked``."""

    @abstractmethod
    def _select(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        """Take ``n`` evictable, unprotected victims out of the order and drop their metadata.

        Parks the non-evictable blocks it meets (``_park_all``, or straight into
        ``_parked`` for a block already out of the order). If it finds fewer than ``n``,
        it puts back what it took and returns ``None``.
        """

    @abstractmethod
    def _clear_order(self) -> None:
        """Drop the order and every block's metadata."""
