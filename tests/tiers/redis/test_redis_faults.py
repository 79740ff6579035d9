"""Faults injected through the server itself fail the jobs they hit, never give wrong bytes, and the tier recovers."""

from __future__ import annotations

import threading
import time

import torch

from kvcontract import LookupResult, TierJob
from kvcontract.tiers import RedisTier
from tests.tiers.redis.support import (
    BLOCK_BYTES,
    MakeTier,
    RedisServer,
    drain,
    fill,
    job_counter,
    key,
    load,
    pattern,
    settle,
    store,
)

_RECOVER_LIMIT_S = 30.0
"""Guard against a hang only: the tier probes the server every 50 ms in these tests."""


def _recovered(tier: RedisTier) -> None:
    """Wait until the tier's breaker closes again (it probes on lookups and submits)."""
    deadline = time.monotonic() + _RECOVER_LIMIT_S
    while not tier.healthy:
        tier.lookup(key(999))
        assert time.monotonic() < deadline, "the tier never recovered"
        time.sleep(0.01)


def _loads_right_or_fails_clean(tier: RedisTier, host: torch.Tensor, seeds: dict[int, int]) -> bool:
    """Load every key of ``seeds`` (key index to content seed); a success must give exactly the stored bytes."""
    keys = [key(i) for i in seeds]
    if any(tier.lookup(k) is not LookupResult.HIT for k in keys):
        return False
    host_ids = list(range(8, 8 + len(keys)))
    host[8 : 8 + len(keys)].fill_(0x5A)
    job = 10_000 + int(time.monotonic_ns() % 1_000_000)
    if not tier.submit_load(TierJob(job, keys, host_ids)):
        return False
    result = drain(tier, [job])[job]
    if result.success:
        for host_id, seed in zip(host_ids, seeds.values()):
            assert torch.equal(host[host_id], pattern(seed))
    else:
        assert not host[8 : 8 + len(keys)].any(), "a failed load zero-fills its host blocks"
    return result.success


def test_client_kill_fails_at_most_the_jobs_it_hits(
    make_tier: MakeTier, own_server: RedisServer, host: torch.Tensor
) -> None:
    tier = make_tier(url=own_server.url)
    fill(host, [0, 1, 2], [1, 2, 3])
    assert store(tier, job_counter(), [key(1), key(2), key(3)], [0, 1, 2]).success
    for _ in range(3):
        own_server.command("CLIENT", "KILL", "TYPE", "normal")
        _loads_right_or_fails_clean(tier, host, {1: 1, 2: 2, 3: 3})
        _recovered(tier)
    assert _loads_right_or_fails_clean(tier, host, {1: 1, 2: 2, 3: 3})


def test_flushall_turns_known_keys_into_misses(
    make_tier: MakeTier, own_server: RedisServer, host: torch.Tensor
) -> None:
    tier = make_tier(url=own_server.url)
    jobs = job_counter()
    fill(host, [0, 1], [1, 2])
    assert store(tier, jobs, [key(1), key(2)], [0, 1]).success
    tier.take_events()
    own_server.command("FLUSHALL")
    host[4:6].fill_(1)
    assert not load(tier, jobs, [key(1), key(2)], [4, 5]).success
    assert not host[4:6].any()
    removed = [k for event in tier.take_events() if event.removed for k in event.keys]
    assert sorted(removed) == [key(1), key(2)]
    assert settle(tier, key(1)) is LookupResult.MISS
    assert store(tier, jobs, [key(1)], [0]).success
    assert load(tier, jobs, [key(1)], [6]).success and torch.equal(host[6], pattern(1))


def test_debug_sleep_past_the_timeout_fails_the_job_then_the_tier_recovers(
    make_tier: MakeTier, own_server: RedisServer, host: torch.Tensor
) -> None:
    tier = make_tier(url=own_server.url, socket_timeout=0.2)
    jobs = job_counter()
    fill(host, [0], [7])
    assert store(tier, jobs, [key(1)], [0]).success
    sleeper = threading.Thread(target=own_server.command, args=("DEBUG", "SLEEP", "1"))
    sleeper.start()
    time.sleep(0.1)
    host[5].fill_(3)
    result = load(tier, jobs, [key(1)], [5])
    assert not result.success and not host[5].any()
    assert tier.stats().timeouts >= 1
    assert not tier.submit_load(TierJob(next(jobs), [key(1)], [5])), "refused while the breaker is open"
    sleeper.join()
    _recovered(tier)
    assert load(tier, jobs, [key(1)], [5]).success and torch.equal(host[5], pattern(7))
    assert tier.stats().reconnects >= 1


def test_server_stop_and_restart_fail_jobs_then_the_tier_recovers(
    make_tier: MakeTier, own_server: RedisServer, host: torch.Tensor
) -> None:
    tier = make_tier(url=own_server.url, socket_timeout=0.5)
    jobs = job_counter()
    fill(host, [0, 1], [1, 2])
    assert store(tier, jobs, [key(1)], [0]).success
    own_server.stop()
    job = next(jobs)
    if tier.submit_store(TierJob(job, [key(2)], [1])):
        assert not drain(tier, [job])[job].success
    assert tier.lookup(key(2)) is not LookupResult.HIT, "a failed store is not readable"
    assert not _loads_right_or_fails_clean(tier, host, {1: 1})
    own_server.start()
    _recovered(tier)
    assert not _loads_right_or_fails_clean(tier, host, {1: 1}), "the restarted server is empty"
    assert settle(tier, key(1)) is LookupResult.MISS
    assert store(tier, jobs, [key(1), key(2)], [0, 1]).success
    assert _loads_right_or_fails_clean(tier, host, {1: 1, 2: 2})
    stats = tier.stats()
    assert stats.connection_errors >= 1 and stats.reconnects >= 1 and stats.failed_jobs >= 1


def test_a_full_server_fails_the_store(make_tier: MakeTier, own_server: RedisServer, host: torch.Tensor) -> None:
    own_server.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
    own_server.command("CONFIG", "SET", "maxmemory", "1")
    tier = make_tier(url=own_server.url)
    result = store(tier, job_counter(), [key(1), key(2)], [0, 1])
    assert not result.success and result.transfer_bytes == 0
    assert tier.lookup(key(1)) is not LookupResult.HIT
    own_server.command("CONFIG", "SET", "maxmemory", "0")
    assert store(tier, job_counter(), [key(1)], [0]).success


def test_allkeys_lru_evictions_are_misses_and_loads_stay_exact(make_tier: MakeTier, own_server: RedisServer) -> None:
    host = torch.zeros((8, 64 * BLOCK_BYTES), dtype=torch.uint8)
    own_server.command("CONFIG", "SET", "maxmemory", str(4 << 20))
    own_server.command("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
    tier = make_tier(url=own_server.url, host_blocks=host)
    jobs = job_counter()
    for i in range(40):
        host[0].copy_(pattern(i, host.shape[1]))
        assert store(tier, jobs, [key(i)], [0]).success
    present = sum(int(own_server.command("EXISTS", tier.redis_key(key(i)))) for i in range(40))
    assert 0 < present < 40, "Redis evicted some blocks"
    loaded = 0
    for i in range(40):
        result = load(tier, jobs, [key(i)], [1])
        if result.success:
            loaded += 1
            assert torch.equal(host[1], pattern(i, host.shape[1]))
    assert loaded == present
    assert tier.stats().evicted == 40 - present
