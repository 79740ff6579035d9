"""What the manager tests share: a manager's whole observable state, to prove a refused call changed nothing,
and a secondary tier whose jobs finish only when a test says so, to pin down the tiering semantics."""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass

import torch
from typing_extensions import override

from kvcontract import (
    BlockStatus,
    CachePolicy,
    LookupResult,
    ManagerStats,
    OffloadKey,
    SecondaryTier,
    TierJob,
    TransferResult,
)
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


@dataclass
class PendingJob:
    """A submitted job and whether it loads (tier to host) or stores (host to tier)."""

    job: TierJob
    load: bool


class ControlledTier(SecondaryTier):
    """Holds blocks in a dict; copies happen in ``finish()``, which the test calls."""

    def __init__(self, host: torch.Tensor, name: str = "tier") -> None:
        self.host = host
        self.name = name
        self.blocks: dict[OffloadKey, torch.Tensor] = {}
        self.pending: list[PendingJob] = []
        self.finished: list[TransferResult] = []
        self.touched: list[list[OffloadKey]] = []
        self.calls: list[str] = []
        self.fail_next = False
        self.refuse_submits = False

    @override
    def lookup(self, key: OffloadKey) -> LookupResult:
        if key in self.blocks:
            return LookupResult.HIT
        writing = any(key in p.job.keys for p in self.pending if not p.load)
        return LookupResult.HIT_PENDING if writing else LookupResult.MISS

    @override
    def submit_store(self, job: TierJob) -> bool:
        self.calls.append(f"store:{len(job.keys)}")
        if self.refuse_submits:
            return False
        self.pending.append(PendingJob(job, load=False))
        return True

    @override
    def submit_load(self, job: TierJob) -> bool:
        self.calls.append(f"load:{len(job.keys)}")
        if self.refuse_submits:
            return False
        self.pending.append(PendingJob(job, load=True))
        return True

    def finish(self) -> None:
        """Run every pending job now (failing them all if ``fail_next`` is set)."""
        for pending in self.pending:
            job = pending.job
            success = not self.fail_next
            if success:
                for key, host_id in zip(job.keys, job.host_block_ids):
                    if pending.load:
                        self.host[host_id] = self.blocks[key]
                    else:
                        self.blocks[key] = self.host[host_id].clone()
            size = len(job.keys) * self.host.shape[1]
            self.finished.append(TransferResult(job.job_id, success, size if success else 0, 1e-6))
        self.pending.clear()
        self.fail_next = False

    @override
    def get_finished(self) -> list[TransferResult]:
        done, self.finished = self.finished, []
        return done

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        self.touched.append(list(keys))

    @override
    def shutdown(self) -> None:
        self.finish()
        self.calls.append("shutdown")
