"""The Redis tier against a real server: round trips, lookups, sharing between tiers, value checks, stats."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

from kvcontract import LookupResult, OffloadingEvent, TierJob
from kvcontract.testing import example_identity
from kvcontract.tiers import RedisTier
from kvcontract.tiers.redis.client import RedisUnavailableError
from kvcontract.tiers.remote_tier import RemoteTierOptions
from kvcontract.tiers.store_value import encode_value
from tests.tiers.redis.support import (
    BLOCK_BYTES,
    IDENTITY,
    MakeTier,
    RedisServer,
    fill,
    free_port,
    job_counter,
    key,
    load,
    pattern,
    settle,
    store,
)


def _removed(events: list[OffloadingEvent]) -> list[bytes]:
    return [k for event in events if event.removed for k in event.keys]


def test_round_trip_gives_the_stored_bytes(make_tier: MakeTier, host: torch.Tensor) -> None:
    tier = make_tier()
    jobs = job_counter()
    keys = [key(i) for i in range(4)]
    fill(host, [0, 1, 2, 3], [10, 11, 12, 13])
    result = store(tier, jobs, keys, [0, 1, 2, 3])
    assert result.success and result.transfer_bytes == 4 * BLOCK_BYTES
    assert all(tier.lookup(k) is LookupResult.HIT for k in keys)
    host.zero_()
    result = load(tier, jobs, keys[::-1], [8, 9, 10, 11])
    assert result.success and result.transfer_bytes == 4 * BLOCK_BYTES
    for host_id, seed in zip([8, 9, 10, 11], [13, 12, 11, 10]):
        assert torch.equal(host[host_id], pattern(seed))
    stored = [k for event in tier.take_events() if not event.removed for k in event.keys]
    assert sorted(stored) == sorted(keys)
    stats = tier.stats()
    assert (stats.bytes_written, stats.bytes_read) == (4 * BLOCK_BYTES, 4 * BLOCK_BYTES)


def test_unseen_key_answers_retry_then_the_server_s_answer(make_tier: MakeTier, host: torch.Tensor) -> None:
    writer, reader = make_tier(), make_tier()
    fill(host, [0], [1])
    store(writer, job_counter(), [key(1)], [0])
    assert reader.lookup(key(1)) is LookupResult.RETRY
    assert settle(reader, key(1)) is LookupResult.HIT
    assert reader.lookup(key(2)) is LookupResult.RETRY
    assert settle(reader, key(2)) is LookupResult.MISS
    stats = reader.stats()
    assert stats.lookups_sent == 2 and stats.hits == 1 and stats.misses == 1


def test_keys_queued_together_go_in_few_exists_batches(make_tier: MakeTier) -> None:
    tier = make_tier()
    keys = [key(i) for i in range(200)]
    assert all(tier.lookup(k) is LookupResult.RETRY for k in keys)
    assert all(settle(tier, k) is LookupResult.MISS for k in keys)
    stats = tier.stats()
    assert stats.lookups_sent == 200
    assert stats.lookup_batches <= 10


def test_a_lookup_still_in_flight_after_the_timeout_is_a_miss(make_tier: MakeTier, own_server: RedisServer) -> None:
    tier = make_tier(url=own_server.url, lookup_timeout=0.05, socket_timeout=5.0)
    sleeper = own_server.client()
    try:
        import threading

        blocked = threading.Thread(target=sleeper.execute_command, args=("DEBUG", "SLEEP", "1"))
        blocked.start()
        time.sleep(0.2)
        assert tier.lookup(key(1)) is LookupResult.RETRY
        answer = settle(tier, key(1))
        blocked.join()
    finally:
        sleeper.close()
    assert answer is LookupResult.MISS
    assert tier.stats().lookup_timeouts == 1


def test_two_tiers_on_one_server_share_blocks(make_tier: MakeTier) -> None:
    host_a = torch.zeros((4, BLOCK_BYTES), dtype=torch.uint8)
    host_b = torch.zeros((4, BLOCK_BYTES), dtype=torch.uint8)
    engine_a = make_tier(host_blocks=host_a, namespace="shared")
    engine_b = make_tier(host_blocks=host_b, namespace="shared")
    other_namespace = make_tier(host_blocks=host_b, namespace="other")
    other_model = make_tier(
        host_blocks=host_b, namespace="shared", identity=example_identity(BLOCK_BYTES, model="other")
    )
    fill(host_a, [0, 1], [5, 6])
    store(engine_a, job_counter(), [key(5), key(6)], [0, 1])
    assert settle(other_model, key(5)) is LookupResult.MISS
    assert settle(other_namespace, key(5)) is LookupResult.MISS
    assert settle(engine_b, key(5)) is LookupResult.HIT and settle(engine_b, key(6)) is LookupResult.HIT
    assert load(engine_b, job_counter(), [key(6), key(5)], [2, 3]).success
    assert torch.equal(host_b[2], host_a[1]) and torch.equal(host_b[3], host_a[0])


@pytest.mark.parametrize("damage", ["flipped-byte", "short", "long", "fingerprint", "other-key", "garbage"])
def test_a_bad_value_is_a_miss_and_a_removed_event_never_host_bytes(
    make_tier: MakeTier, redis_server: RedisServer, host: torch.Tensor, damage: str
) -> None:
    tier = make_tier()
    jobs = job_counter()
    fill(host, [0, 1], [1, 2])
    assert store(tier, jobs, [key(1), key(2)], [0, 1]).success
    tier.take_events()
    name = tier.redis_key(key(1))
    good = bytes(redis_server.command("GET", name))
    if damage == "flipped-byte":
        bad = good[:-1] + bytes([good[-1] ^ 1])
    elif damage == "short":
        bad = good[:-1]
    elif damage == "long":
        bad = good + b"\0"
    elif damage == "fingerprint":
        bad = encode_value(
            key(1), example_identity(BLOCK_BYTES, model="another model").fingerprint, memoryview(good)[-BLOCK_BYTES:]
        )
    elif damage == "other-key":
        bad = bytes(redis_server.command("GET", tier.redis_key(key(2))))
    else:
        bad = b"not a block"
    redis_server.command("SET", name, bad)
    host[4:6].fill_(7)
    result = load(tier, jobs, [key(2), key(1)], [4, 5])
    assert not result.success and result.transfer_bytes == 0
    assert not host[4:6].any(), "a failed load leaves its host blocks zero-filled"
    assert _removed(tier.take_events()) == [key(1)]
    assert tier.lookup(key(1)) is LookupResult.RETRY
    assert settle(tier, key(1)) is LookupResult.MISS, "the bad value is deleted"
    stats = tier.stats()
    assert stats.checksum_failures + stats.rejected_values + stats.identity_mismatches == 1
    assert stats.checksum_failures == (damage == "flipped-byte")
    assert stats.identity_mismatches == (damage == "fingerprint")
    assert tier.lookup(key(2)) is LookupResult.HIT


def test_a_key_redis_evicted_is_a_miss(make_tier: MakeTier, redis_server: RedisServer, host: torch.Tensor) -> None:
    tier = make_tier()
    jobs = job_counter()
    store(tier, jobs, [key(1)], [0])
    redis_server.command("DEL", tier.redis_key(key(1)))
    assert tier.lookup(key(1)) is LookupResult.HIT
    assert not load(tier, jobs, [key(1)], [1]).success
    assert _removed(tier.take_events()) == [key(1)]
    assert tier.stats().evicted == 1
    assert settle(tier, key(1)) is LookupResult.MISS


def test_a_ttl_expires_values(make_tier: MakeTier, redis_server: RedisServer) -> None:
    tier = make_tier(ttl_seconds=100)
    store(tier, job_counter(), [key(1)], [0])
    assert 0 < int(redis_server.command("TTL", tier.redis_key(key(1)))) <= 100


def test_load_of_a_key_not_known_present_is_refused(make_tier: MakeTier) -> None:
    tier = make_tier()
    assert not tier.submit_load(TierJob(1, [key(1)], [0]))


def test_keys_are_hash_tagged_by_namespace_and_group(make_tier: MakeTier) -> None:
    tier = make_tier(namespace="model-a")
    name = tier.redis_key(key(1)).decode()
    assert name.startswith(f"{{kvc:{IDENTITY.fingerprint_hex[:16]}:model-a:") and name.endswith(key(1).hex())
    assert make_tier().redis_key(key(1)).decode().startswith(f"{{kvc:{IDENTITY.fingerprint_hex[:16]}:")


def test_an_unreachable_server_is_one_clear_line(host: torch.Tensor) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(RedisUnavailableError) as raised:
        RedisTier(host, identity=IDENTITY, url=url, connect_timeout=0.5)
    message = str(raised.value)
    assert "\n" not in message and url in message and "start_degraded" in message


def test_start_degraded_misses_until_the_server_comes(tmp_path: object, host: torch.Tensor) -> None:
    port = free_port()
    tier = RedisTier(
        host,
        identity=IDENTITY,
        url=f"redis://127.0.0.1:{port}/0",
        connect_timeout=0.5,
        options=RemoteTierOptions(retry_interval=0.05, start_degraded=True),
    )
    server: RedisServer | None = None
    try:
        assert not tier.healthy
        assert tier.lookup(key(1)) is LookupResult.MISS
        assert not tier.submit_store(TierJob(1, [key(1)], [0]))
        from pathlib import Path

        assert isinstance(tmp_path, Path)
        server = RedisServer(tmp_path / "late", port=port)
        _wait_healthy(tier)
        assert store(tier, job_counter(), [key(1)], [0]).success
        assert tier.stats().reconnects == 1
    finally:
        tier.shutdown()
        if server is not None:
            server.stop()


def _wait_healthy(tier: RedisTier) -> None:
    deadline = time.monotonic() + 30
    while not tier.healthy:
        tier.lookup(key(0))
        assert time.monotonic() < deadline, "the tier never reconnected"
        time.sleep(0.01)


def test_import_kvcontract_does_not_import_redis() -> None:
    code = "import sys, kvcontract, kvcontract.tiers, kvcontract.assembly; print('redis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_missing_redis_package_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['redis'] = None\n"
        "import torch\n"
        "from kvcontract.testing import example_identity\n"
        "from kvcontract.tiers import RedisTier\n"
        "try:\n"
        "    RedisTier(torch.zeros((1, 8), dtype=torch.uint8), identity=example_identity(8), url='redis://127.0.0.1:1/0')\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'kvcontract[redis]'" in out.stdout
