"""What the manager tests share: a manager's whole observable state, to prove a refused call changed nothing."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kvcontract import ManagerStats, OffloadKey
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
