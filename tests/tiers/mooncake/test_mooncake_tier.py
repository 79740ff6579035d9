"""The Mooncake tier on a real store: exact round trips between engines, checked values, faults that fail jobs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kvcontract import LookupResult, OffloadingEvent, TierJob
from kvcontract.testing import example_identity
from kvcontract.tiers import MooncakeTier
from kvcontract.tiers.mooncake.client import MooncakeUnavailableError
from kvcontract.tiers.store_value import encode_value
from tests.tiers.mooncake.support import MakeTier, MooncakeStore, tier_on
from tests.tiers.redis.support import (
    BLOCK_BYTES,
    drain,
    fill,
    free_port,
    job_counter,
    key,
    load,
    pattern,
    settle,
    store,
)

_RECOVER_LIMIT_S = 30.0
"""Guard against a hang only: the tier probes every 50 ms and the client re-mounts within seconds."""


@pytest.mark.usefixtures("value_path")
def test_another_engine_loads_exactly_what_one_stored(make_tier: MakeTier, host: torch.Tensor) -> None:
    writer = make_tier(namespace="share")
    jobs = job_counter()
    fill(host, range(4), [10, 11, 12, 13])
    assert store(writer, jobs, [key(i) for i in range(4)], range(4)).success
    assert writer.take_events() == [OffloadingEvent([key(i) for i in range(4)], "MOONCAKE", removed=False)]
    reader_host = torch.zeros_like(host)
    reader = make_tier(namespace="share", host_blocks=reader_host)
    assert [reader.lookup(key(i)) for i in range(5)] == [LookupResult.RETRY] * 5
    assert [settle(reader, key(i)) for i in range(5)] == [LookupResult.HIT] * 4 + [LookupResult.MISS]
    result = load(reader, jobs, [key(3), key(0)], [7, 8])
    assert result.success and result.transfer_bytes == 2 * BLOCK_BYTES
    assert torch.equal(reader_host[7], pattern(13)) and torch.equal(reader_host[8], pattern(10))
    stats = reader.stats()
    assert stats.lookups_sent == 5 and stats.lookup_batches <= 2 and stats.bytes_read == 2 * BLOCK_BYTES


@pytest.mark.usefixtures("value_path")
def test_a_load_of_a_key_not_known_present_is_refused(make_tier: MakeTier) -> None:
    tier = make_tier()
    assert not tier.submit_load(TierJob(1, [key(1)], [0]))


@pytest.mark.usefixtures("value_path")
@pytest.mark.parametrize("damage", ["garbage", "short", "flipped", "other-key", "identity"])
def test_a_bad_value_is_a_failed_load_with_zeros_an_event_and_gone(
    make_tier: MakeTier, host: torch.Tensor, mooncake_store: MooncakeStore, damage: str
) -> None:
    tier = make_tier()
    jobs = job_counter()
    fill(host, [0, 1], [1, 2])
    assert store(tier, jobs, [key(1), key(2)], [0, 1]).success
    tier.take_events()
    good = encode_value(key(1), tier.identity.fingerprint, memoryview(pattern(1).numpy().tobytes()))
    values = {
        "garbage": b"garbage",
        "short": good[:-1],
        "flipped": good[:-1] + bytes([good[-1] ^ 0xFF]),
        "other-key": encode_value(key(2), tier.identity.fingerprint, memoryview(pattern(1).numpy().tobytes())),
        "identity": encode_value(
            key(1), example_identity(BLOCK_BYTES, model="other").fingerprint, memoryview(pattern(1).numpy().tobytes())
        ),
    }
    raw = mooncake_store.raw()
    try:
        assert raw.upsert(tier.store_key(key(1)), values[damage]) == 0
        host.fill_(0xAB)
        result = load(tier, jobs, [key(2), key(1)], [2, 3])
        assert not result.success and result.transfer_bytes == 0
        assert not host[2].any() and not host[3].any(), "a failed load leaves zeros in every host block of the job"
        assert tier.take_events() == [OffloadingEvent([key(1)], "MOONCAKE", removed=True)]
        deadline = time.monotonic() + _RECOVER_LIMIT_S
        while raw.is_exist(tier.store_key(key(1))) == 1:
            assert time.monotonic() < deadline, "the bad value was never removed"
            time.sleep(0.01)
        stats = tier.stats()
        assert (stats.checksum_failures, stats.identity_mismatches) == (
            int(damage == "flipped"),
            int(damage == "identity"),
        )
        assert stats.checksum_failures + stats.identity_mismatches + stats.rejected_values == 1
        assert settle(tier, key(1)) is LookupResult.MISS and settle(tier, key(2)) is LookupResult.HIT
    finally:
        raw.close()


@pytest.mark.usefixtures("value_path")
def test_a_value_removed_behind_the_tier_is_a_failed_load_and_an_eviction(
    make_tier: MakeTier, host: torch.Tensor, mooncake_store: MooncakeStore
) -> None:
    tier = make_tier()
    jobs = job_counter()
    fill(host, [0], [5])
    assert store(tier, jobs, [key(5)], [0]).success
    raw = mooncake_store.raw()
    try:
        assert raw.remove(tier.store_key(key(5)), True) == 0
    finally:
        raw.close()
    result = load(tier, jobs, [key(5)], [1])
    assert not result.success and not host[1].any()
    assert tier.stats().evicted == 1 and settle(tier, key(5)) is LookupResult.MISS


@pytest.mark.usefixtures("value_path")
def test_a_load_that_names_a_key_twice_fills_both_blocks_and_keeps_the_value(
    make_tier: MakeTier, host: torch.Tensor
) -> None:
    """Mooncake's client answers a get that names one key twice as two successes but fills one buffer:
    the tier asks once per key, so both blocks get the value and no good value is taken for bad."""
    tier = make_tier()
    jobs = job_counter()
    fill(host, [0, 1], [21, 22])
    assert store(tier, jobs, [key(1), key(2)], [0, 1]).success
    tier.take_events()
    result = load(tier, jobs, [key(1), key(2), key(1)], [4, 5, 6])
    assert result.success and result.transfer_bytes == 3 * BLOCK_BYTES
    assert [torch.equal(host[row], pattern(seed)) for row, seed in ((4, 21), (5, 22), (6, 21))] == [True] * 3
    assert tier.take_events() == [] and tier.stats().rejected_values == 0
    assert settle(tier, key(1)) is LookupResult.HIT


def test_no_master_at_start_is_one_clear_line(
    host: torch.Tensor, mooncake_store: MooncakeStore, make_tier: MakeTier
) -> None:
    started = time.monotonic()
    with pytest.raises(MooncakeUnavailableError, match=r"cannot reach the master at 127\.0\.0\.1:\d+ .*start_degraded"):
        make_tier(master=f"127.0.0.1:{free_port()}")
    assert time.monotonic() - started < 5.0, "an absent master is reported at once, not after the client's retries"


def test_a_degraded_start_refuses_jobs_then_recovers_when_the_master_comes(
    tmp_path: Path, mooncake_store: MooncakeStore, host: torch.Tensor
) -> None:
    port, metadata_port = free_port(), free_port()
    tier = tier_on(
        mooncake_store,
        host,
        master=f"127.0.0.1:{port}",
        metadata_server=f"http://127.0.0.1:{metadata_port}/metadata",
        start_degraded=True,
    )
    late: MooncakeStore | None = None
    try:
        assert not tier.healthy and tier.lookup(key(1)) is LookupResult.MISS
        assert not tier.submit_store(TierJob(1, [key(1)], [0]))
        late = MooncakeStore(tmp_path / "late", port=port, metadata_port=metadata_port)
        _store_until_success(tier, job_counter(), host, 9)
        assert tier.stats().reconnects == 1
    finally:
        tier.shutdown()
        if late is not None:
            late.close()


def test_a_master_restart_fails_what_it_hit_and_the_tier_recovers(tmp_path: Path, host: torch.Tensor) -> None:
    own = MooncakeStore(tmp_path / "own")
    tier = tier_on(own, host, namespace="restart")
    try:
        jobs = job_counter()
        fill(host, [0], [3])
        assert store(tier, jobs, [key(3)], [0]).success
        own.restart()
        if tier.submit_load(TierJob(99, [key(3)], [1])):
            assert not drain(tier, [99])[99].success and not host[1].any(), "the restarted master forgot the value"
        _store_until_success(tier, jobs, host, 4)
        host[1].zero_()
        assert load(tier, jobs, [key(4)], [1]).success and torch.equal(host[1], pattern(4))
    finally:
        tier.shutdown()
        own.close()


def test_a_stalled_master_times_the_job_out_and_the_tier_recovers(tmp_path: Path, host: torch.Tensor) -> None:
    own = MooncakeStore(tmp_path / "own")
    tier = tier_on(own, host, namespace="stall")
    try:
        jobs = job_counter()
        fill(host, [0], [6])
        own.stall()
        try:
            assert not store(tier, jobs, [key(6)], [0]).success
        finally:
            own.resume()
        stats = tier.stats()  # the lookup thread may time out on the stalled master too
        assert stats.timeouts >= 1 and stats.failed_jobs == 1
        _store_until_success(tier, jobs, host, 6)
        assert settle(tier, key(6)) is LookupResult.HIT
    finally:
        tier.shutdown()
        own.close()


def _wait_healthy(tier: MooncakeTier) -> None:
    deadline = time.monotonic() + _RECOVER_LIMIT_S
    while not tier.healthy:
        tier.lookup(key(10_000))
        assert time.monotonic() < deadline, "the tier never recovered"
        time.sleep(0.01)


def _store_until_success(tier: MooncakeTier, jobs: Iterator[int], host: torch.Tensor, seed: int) -> None:
    """Store content ``seed`` under its key until a store succeeds: the client re-mounts after a restart within seconds."""
    deadline = time.monotonic() + _RECOVER_LIMIT_S
    while True:
        _wait_healthy(tier)
        fill(host, [0], [seed])
        job = next(jobs)
        if tier.submit_store(TierJob(job, [key(seed)], [0])) and drain(tier, [job])[job].success:
            return
        assert time.monotonic() < deadline, "the tier never stored again"
        time.sleep(0.05)
