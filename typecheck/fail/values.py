"""Misuse of the contracts' value types and of incomplete implementations."""

from __future__ import annotations

from kvcontract import BlockIdsSpec, CachePolicy
from kvcontract.managers import CPUOffloadingManager
from typecheck.fail._fixtures import ctx, key, manager


class IncompletePolicy(CachePolicy):
    """Implements none of the abstract methods."""


IncompletePolicy()  # type: ignore[abstract]  # pyright: ignore[reportAbstractUsage]
spec = BlockIdsSpec([1, 2])
spec.block_ids = [3]  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]
result: bool = manager.lookup(key, ctx)  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]
CPUOffloadingManager(16, policy=3)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
CPUOffloadingManager(16, "lru", True)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
