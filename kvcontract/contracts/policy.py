"""The eviction-policy contract: which blocks a block pool keeps and which it gives up."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence, Set
from typing import Protocol

from kvcontract.contracts.base import Contract
from kvcontract.contracts.keys import OffloadKey
from kvcontract.contracts.values import BlockStatus

__all__ = ["CachePolicy"]


class CachePolicy(Contract, Protocol):
    """Holds the blocks of a pool of fixed capacity (in blocks) and chooses victims."""

    @abstractmethod
    def get(self, key: OffloadKey) -> BlockStatus | None:
        """The block of ``key``, or ``None``; does not count as a use."""

    @abstractmethod
    def insert(self, key: OffloadKey, block: BlockStatus) -> None:
        """Add a new block as the most recently used."""

    def insert_many(self, keys: Sequence[OffloadKey], blocks: Sequence[BlockStatus]) -> None:
        """Insert ``keys[i]`` with ``blocks[i]``, in order, as that many ``insert`` calls would.

        One call for a request's new blocks: managers use it on their hot path. All or
        nothing: when it raises, the policy holds what it held before. The built-in
        policies check the whole batch first; this default calls ``insert`` for each pair
        and removes what it inserted when one of them raises.
        """
        if len(keys) != len(blocks):
            raise ValueError(
                f"{type(self).__name__}.insert_many: {len(keys)} keys but {len(blocks)} blocks; pass one block per key"
            )
        inserted = 0
        try:
            for key, block in zip(keys, blocks):
                self.insert(key, block)
                inserted += 1
        except BaseException:
            for key in keys[:inserted]:
                self.remove(key)
            raise

    @abstractmethod
    def remove(self, key: OffloadKey) -> None:
        """Drop ``key`` (no effect if absent)."""

    @abstractmethod
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        """Mark ``keys`` recently used, the first key most recently."""

    @abstractmethod
    def evict(self, n: int, protected: Set[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        """Remove and return exactly ``n`` victims, or ``None`` and change nothing.

        Never takes a key in ``protected``, a pinned block (``ref_cnt > 0``) or a block
        whose store is in flight (``ref_cnt == -1``).
        """

    @abstractmethod
    def clear(self) -> None:
        """Drop every block."""

    def mark_evictable(self, key: OffloadKey) -> None:
        """Hint: ``key`` became evictable (its ``ref_cnt`` dropped to 0)."""
        return None

    def mark_non_evictable(self, key: OffloadKey) -> None:
        """Hint: ``key`` stopped being evictable (pinned, or its store in flight)."""
        return None

    @abstractmethod
    def __len__(self) -> int:
        """Number of blocks held, in flight included."""
