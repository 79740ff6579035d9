"""What the manager tests share: a manager's whole observable state, to prove a refused call changed nothing."""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass

from typing_extensions import override

from kvcontract import BlockStatus, CachePolicy, ManagerStats, OffloadKey
from kvcontract.managers import CPUOffloadingManager


@dataclass(frozen=True)
class Snapshot:
    """The counters, and each key's block id and reference count (``None`` when not held)."""

    stats: ManagerStats
    blocks: dict[OffloadKey, tuple[int, int] | None]


def snapshot(manager: CPUOffloadingManager, keys: Iterable[OffloadKey]) -> Snapshot:
    """``manager``'s state over ``keys``, read without changing it (no lookup, no event taken)."""
    blocks: dict[OffloadKey, tuple[int, int] | None] = {}
    for key in keys:
        block = manager.policy.get(key)
        blocks[key] = None if block is None else (block.block_id, block.ref_cnt)
    return Snapshot(manager.stats(), blocks)


class Delegating(CachePolicy):
    """A built-in policy behind a plain ``CachePolicy``: the manager keeps its own block table for it."""

    def __init__(self, inner: CachePolicy) -> None:
        self.inner = inner

    @override
    def get(self, key: OffloadKey) -> BlockStatus | None:
        return self.inner.get(key)

    @override
    def insert(self, key: OffloadKey, block: BlockStatus) -> None:
        self.inner.insert(key, block)

    @override
    def insert_many(self, keys: Sequence[OffloadKey], blocks: Sequence[BlockStatus]) -> None:
        self.inner.insert_many(keys, blocks)

    @override
    def remove(self, key: OffloadKey) -> None:
        self.inner.remove(key)

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        self.inner.touch(keys)

    @override
    def evict(self, n: int, protected: Set[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        return self.inner.evict(n, protected)

    @override
    def clear(self) -> None:
        self.inner.clear()

    @override
    def mark_evictable(self, key: OffloadKey) -> None:
        self.inner.mark_evictable(key)

    @override
    def __len__(self) -> int:
        return len(self.inner)
