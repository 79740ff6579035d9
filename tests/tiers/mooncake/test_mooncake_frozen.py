"""A Mooncake master frozen with SIGSTOP: loads are failed at ``job_deadline`` too, and queued jobs are refused each once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kvcontract import LookupResult, TierJob
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.tiers.mooncake.support import MooncakeStore, tier_on
from tests.tiers.redis.support import fill, job_counter, key, settle, store
from tests.tiers.support import REPORT_LIMIT_S, reports_of


@pytest.fixture
def own_store(tmp_path: Path) -> Iterator[MooncakeStore]:
    """A master of the test's own, running again after the test whatever it did."""
    own = MooncakeStore(tmp_path / "own")
    yield own
    own.resume()
    own.resume_segment()
    own.close()


@pytest.mark.usefixtures("value_path")
def test_a_load_past_its_deadline_fails_once_and_its_late_bytes_never_land(
    own_store: MooncakeStore, host: torch.Tensor
) -> None:
    """Master and segment frozen (the client may know where a value lies without asking the master), then running
    again before the client's timeout: the get succeeds after the job was failed."""
    tier = tier_on(own_store, host, namespace="late", timeout=5.0, options=RemoteTierOptions(job_deadline=0.3))
    try:
        jobs = job_counter()
        fill(host, [0], [1])
        assert store(tier, jobs, [key(1)], [0]).success
        assert settle(tier, key(1)) is LookupResult.HIT
        own_store.stall()
        own_store.stall_segment()
        host[4].fill_(0x77)
        job_id = next(jobs)
        assert tier.submit_load(TierJob(job_id, [key(1)], [4]))
        reports, seconds = reports_of(tier, {job_id})
        assert not reports[job_id].success and seconds < 2.0, f"reported after {seconds:.1f} s, past job_deadline 0.3 s"
        assert not host[4].any(), "an expired load's host block is zero-filled"
        host[4].fill_(0x33)  # the engine gave the block to something else
        own_store.resume()
        own_store.resume_segment()
        deadline = time.monotonic() + REPORT_LIMIT_S
        while tier._expired and time.monotonic() < deadline:  # pyright: ignore[reportPrivateUsage]  # until the late reply
            time.sleep(0.01)
        assert tier.get_finished() == [], "the late completion is never reported"
        assert bool((host[4] == 0x33).all()), "no late byte lands in the expired job's host block"
        assert tier.stats().expired_jobs == 1
    finally:
        tier.shutdown()


def test_jobs_refused_together_are_counted_each(own_store: MooncakeStore, host: torch.Tensor) -> None:
    """The store lane merges queued jobs into one call: once the breaker is open, each of them is one refused job."""
    tier = tier_on(own_store, host, namespace="refused")
    try:
        jobs = job_counter()
        fill(host, [0], [2])
        assert store(tier, jobs, [key(2)], [0]).success
        own_store.stall()
        first = next(jobs)
        assert tier.submit_store(TierJob(first, [key(1_000)], [0]))
        time.sleep(0.3)  # the first call is in flight (and times out at 1 s): the next jobs queue behind it
        queued = {next(jobs) for _ in range(40)}
        for job_id in sorted(queued):
            assert tier.submit_store(TierJob(job_id, [key(1_000 + job_id)], [0]))
        reports, _ = reports_of(tier, queued | {first})
        assert not any(result.success for result in reports.values())
        assert tier.stats().refused_jobs == 40, "every queued job is one refused job, not its batch"
    finally:
        tier.shutdown()
