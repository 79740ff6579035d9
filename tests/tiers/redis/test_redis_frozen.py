"""A Redis server frozen with SIGSTOP (a stuck VM, a long fork): every wait of the tier has a bound, no byte lands late."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import torch

from kvcontract import LookupResult, TierJob
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.tiers.redis.support import MakeTier, RedisServer, fill, job_counter, key, settle, store
from tests.tiers.support import REPORT_LIMIT_S, reports_of

_SOCKET_TIMEOUT_S = 1.0


@pytest.fixture
def frozen(own_server: RedisServer) -> Iterator[RedisServer]:
    """The test's own server, thawed again after the test whatever it did."""
    yield own_server
    own_server.thaw()


def test_queued_jobs_fail_at_once_when_the_breaker_opens(
    make_tier: MakeTier, frozen: RedisServer, host: torch.Tensor
) -> None:
    """40 store jobs on 2 I/O threads: the first call of each thread times out, the other 38 fail with no call.

    Before, each job waited out its own timeout: 20 s here (40 jobs, 2 threads, 1 s each)."""
    tier = make_tier(url=frozen.url, socket_timeout=_SOCKET_TIMEOUT_S, io_threads=2)
    jobs = job_counter()
    assert store(tier, jobs, [key(0)], [0]).success
    frozen.freeze()
    ids = {next(jobs) for _ in range(40)}
    for job_id in sorted(ids):
        assert tier.submit_store(TierJob(job_id, [key(job_id)], [job_id % 4]))
    reports, seconds = reports_of(tier, ids)
    assert not any(result.success for result in reports.values())
    assert tier.stats().refused_jobs >= 36
    assert seconds < 4 * _SOCKET_TIMEOUT_S, f"40 queued jobs took {seconds:.1f} s to fail"
    assert not tier.submit_store(TierJob(next(jobs), [key(99)], [0])), "the breaker refuses new jobs at once"
    assert tier.lookup(key(0)) is LookupResult.MISS, "a known key is a miss while the breaker is open, as documented"


def test_shutdown_returns_within_a_bound_with_jobs_in_flight(
    make_tier: MakeTier, frozen: RedisServer, host: torch.Tensor
) -> None:
    tier = make_tier(url=frozen.url, socket_timeout=_SOCKET_TIMEOUT_S, io_threads=2)
    jobs = job_counter()
    fill(host, [0], [1])
    assert store(tier, jobs, [key(0)], [0]).success
    frozen.freeze()
    ids = {next(jobs) for _ in range(20)}
    for job_id in sorted(ids):
        assert tier.submit_store(TierJob(job_id, [key(job_id)], [1]))
    tier.lookup(key(500))
    started = time.monotonic()
    tier.shutdown()
    seconds = time.monotonic() - started
    assert seconds < 3 * _SOCKET_TIMEOUT_S, f"shutdown took {seconds:.1f} s with a frozen server"
    reports, _ = reports_of(tier, ids)
    assert not any(result.success for result in reports.values())


def test_a_load_past_its_deadline_fails_once_and_its_late_bytes_never_land(
    make_tier: MakeTier, frozen: RedisServer, host: torch.Tensor
) -> None:
    tier = make_tier(url=frozen.url, socket_timeout=5.0, options=RemoteTierOptions(job_deadline=0.3))
    jobs = job_counter()
    fill(host, [0], [1])
    assert store(tier, jobs, [key(1)], [0]).success
    assert settle(tier, key(1)) is LookupResult.HIT
    frozen.freeze()
    host[4].fill_(0x77)
    job_id = next(jobs)
    assert tier.submit_load(TierJob(job_id, [key(1)], [4]))
    reports, seconds = reports_of(tier, {job_id})
    assert not reports[job_id].success and seconds < 2.0, f"reported after {seconds:.1f} s, past job_deadline 0.3 s"
    assert not host[4].any(), "an expired load's host block is zero-filled"
    assert tier.stats().expired_jobs == 1
    host[4].fill_(0x33)  # the engine gave the block to something else
    frozen.thaw()
    deadline = time.monotonic() + REPORT_LIMIT_S
    while tier.stats().bytes_read == 0 and tier.stats().expired_jobs == 1 and time.monotonic() < deadline:
        if not tier._expired:  # pyright: ignore[reportPrivateUsage]  # the late reply has come back
            break
        time.sleep(0.01)
    assert tier.get_finished() == [], "the late completion is never reported"
    assert bool((host[4] == 0x33).all()), "no late byte lands in the expired job's host block"
    assert tier.stats().bytes_read == 0 and tier.stats().expired_jobs == 1
    assert tier.lookup(key(1)) is LookupResult.HIT, "the key is still known present"


def test_a_store_past_its_deadline_is_reported_once(make_tier: MakeTier, frozen: RedisServer) -> None:
    tier = make_tier(url=frozen.url, socket_timeout=5.0, options=RemoteTierOptions(job_deadline=0.3))
    jobs = job_counter()
    assert store(tier, jobs, [key(1)], [0]).success
    frozen.freeze()
    job_id = next(jobs)
    assert tier.submit_store(TierJob(job_id, [key(2)], [1]))
    reports, _ = reports_of(tier, {job_id})
    assert not reports[job_id].success
    assert tier.lookup(key(2)) is not LookupResult.HIT_PENDING, "the expired store no longer claims its key"
    frozen.thaw()
    deadline = time.monotonic() + REPORT_LIMIT_S
    while tier._expired and time.monotonic() < deadline:  # pyright: ignore[reportPrivateUsage]  # until the late reply
        time.sleep(0.01)
    assert tier.get_finished() == [] and tier.stats().expired_jobs == 1
