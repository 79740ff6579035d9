"""Store and load helpers shared by the file tier tests."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from kvcontract import OffloadKey, TierJob, TransferResult
from kvcontract.tiers import FileTier
from tests.tiers.conftest import drain, pattern


def fill(host: torch.Tensor, host_ids: Sequence[int], seeds: Sequence[int]) -> None:
    """Write content ``seeds[i]`` into host block ``host_ids[i]``."""
    for host_id, seed in zip(host_ids, seeds):
        host[host_id].copy_(pattern(seed, host.shape[1]))


def store(
    tier: FileTier, job_ids: Iterator[int], keys: Sequence[OffloadKey], host_ids: Sequence[int]
) -> TransferResult:
    """Store ``keys`` from ``host_ids`` and wait for the result; the submit must be accepted."""
    job_id = next(job_ids)
    assert tier.submit_store(TierJob(job_id, keys, host_ids))
    return drain(tier, [job_id])[job_id]


def load(
    tier: FileTier, job_ids: Iterator[int], keys: Sequence[OffloadKey], host_ids: Sequence[int]
) -> TransferResult:
    """Load ``keys`` into ``host_ids`` and wait for the result; the submit must be accepted."""
    job_id = next(job_ids)
    assert tier.submit_load(TierJob(job_id, keys, host_ids))
    return drain(tier, [job_id])[job_id]
