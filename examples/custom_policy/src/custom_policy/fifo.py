"""First in, first out: evicts the block stored longest ago, whatever its later use."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence, Set

from typing_extensions import override

from kvcontract import BlockStatus, CachePolicy, OffloadKey


class FIFOPolicy(CachePolicy):
    """Keeps blocks in insertion order; ``touch`` changes nothing.

    Eviction walks from the oldest block and skips protected, pinned and in-flight
    blocks, so it is atomic: it returns ``None`` before removing anything if fewer than
    ``n`` blocks can go.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"FIFOPolicy capacity must be at least 1 block, got {capacity}")
        self._capacity = capacity
        self._blocks: OrderedDict[OffloadKey, BlockStatus] = OrderedDict()

    @override
    def get(self, key: OffloadKey) -> BlockStatus | None:
        return self._blocks.get(key)

    @override
    def insert(self, key: OffloadKey, block: BlockStatus) -> None:
        if key in self._blocks:
            raise ValueError(f"FIFOPolicy already holds {key.hex()}: remove it first")
        if len(self._blocks) >= self._capacity:
            raise ValueError(f"FIFOPolicy is full ({self._capacity} blocks): evict first")
        self._blocks[key] = block

    @override
    def remove(self, key: OffloadKey) -> None:
        self._blocks.pop(key, None)

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        return None

    @override
    def evict(self, n: int, protected: Set[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        if n < 0:
            raise ValueError(f"FIFOPolicy.evict: n must be >= 0, got {n}")
        victims: list[tuple[OffloadKey, BlockStatus]] = []
        for key, block in self._blocks.items():
            if len(victims) == n:
                break
            if block.ref_cnt == 0 and key not in protected:
                victims.append((key, block))
        if len(victims) < n:
            return None
        for key, _ in victims:
            del self._blocks[key]
        return victims

    @override
    def clear(self) -> None:
        self._blocks.clear()

    @override
    def __len__(self) -> int:
        return len(self._blocks)
