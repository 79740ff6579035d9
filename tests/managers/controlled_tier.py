"""A secondary tier whose jobs finish only when a test says so, to pin down the tiering semantics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from typing_extensions import override

from kvcontract import LookupResult, OffloadKey, SecondaryTier, TierJob, TransferResult


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
