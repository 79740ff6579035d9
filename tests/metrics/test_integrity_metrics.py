"""Integrity metrics: refused contract calls and blocks that fail their checksum in a real tier, scraped."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch

from kvcontract import ContractViolation, ReqContext, TierJob
from kvcontract.managers import CPUOffloadingManager, TieringOffloadingManager
from kvcontract.metrics import MetricsCollector, manager_source
from kvcontract.testing import example_identity
from kvcontract.tiers import FileTier, RedisTier
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.metrics.support import needs_redis, scrape, value_of
from tests.tiers.redis import support as redis_support
from tests.tiers.support import drain, key, pattern


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_refused_contract_call_counts_as_a_contract_violation() -> None:
    collector = MetricsCollector()
    before = value_of(collector, "kvcontract_contract_violations_total")
    manager = CPUOffloadingManager(4, "lru")
    with pytest.raises(ContractViolation):  # a str where the contract takes an OffloadKey: the violation under test
        manager.lookup("not a key", ReqContext("r"))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    manager.lookup(key(1), ReqContext("r"))
    assert value_of(collector, "kvcontract_contract_violations_total") == before + 1


def test_a_corrupt_block_file_counts_as_a_checksum_failure_of_the_file_tier(tmp_path: Path) -> None:
    host = torch.zeros(8, 4096, dtype=torch.uint8)
    tier = FileTier(tmp_path / "tier", 4, host, identity=example_identity(4096))
    jobs = itertools.count(1)
    try:
        manager = TieringOffloadingManager(CPUOffloadingManager(4, "lru"), [tier])
        collector = MetricsCollector()
        collector.add(manager_source(manager))
        host[0].copy_(pattern(1))
        host[1].copy_(pattern(2))
        stored = next(jobs)
        assert tier.submit_store(TierJob(stored, [key(1), key(2)], [0, 1]))
        assert drain(tier, [stored])[stored].success
        assert value_of(collector, "kvcontract_checksum_failures_total", {"tier": "1:FileTier"}) == 0
        _flip_last_byte(tier.block_path(key(1)))
        tier.block_path(key(2)).unlink()  # gone, not corrupt: a miss that is no checksum failure
        loaded = next(jobs)
        assert tier.submit_load(TierJob(loaded, [key(1), key(2)], [2, 3]))
        assert not drain(tier, [loaded])[loaded].success
        assert value_of(collector, "kvcontract_checksum_failures_total", {"tier": "1:FileTier"}) == 1
        assert tier.stats().checksum_failures == 1
    finally:
        tier.shutdown()


@needs_redis
def test_a_corrupt_redis_value_counts_as_a_checksum_failure_of_the_redis_tier(tmp_path: Path) -> None:
    server = redis_support.RedisServer(tmp_path / "redis")
    host = torch.zeros(redis_support.HOST_BLOCKS, redis_support.BLOCK_BYTES, dtype=torch.uint8)
    tier = RedisTier(
        host, identity=redis_support.IDENTITY, url=server.url, options=RemoteTierOptions(namespace="metrics")
    )
    jobs = redis_support.job_counter()
    try:
        manager = TieringOffloadingManager(CPUOffloadingManager(4, "lru"), [tier])
        collector = MetricsCollector()
        collector.add(manager_source(manager))
        redis_support.fill(host, [0], [1])
        assert redis_support.store(tier, jobs, [key(1)], [0]).success
        name = tier.redis_key(key(1))
        good = bytes(server.command("GET", name))
        server.command("SET", name, good[:-1] + bytes([good[-1] ^ 1]))
        assert not redis_support.load(tier, jobs, [key(1)], [1]).success
        assert value_of(collector, "kvcontract_checksum_failures_total", {"tier": "1:RedisTier"}) == 1
    finally:
        tier.shutdown()
        server.stop()


def test_a_scrape_shows_checksum_failures_and_contract_violations_as_counters(tmp_path: Path) -> None:
    tier = FileTier(tmp_path / "tier", 4, torch.zeros(4, 4096, dtype=torch.uint8), identity=example_identity(4096))
    collector = MetricsCollector()
    collector.add(manager_source(TieringOffloadingManager(CPUOffloadingManager(4, "lru"), [tier])))
    try:
        families = scrape(collector)
    finally:
        tier.shutdown()
    assert families["kvcontract_checksum_failures"].type == "counter"
    assert families["kvcontract_checksum_failures"].samples[0].labels == {"tier": "1:FileTier"}
    assert families["kvcontract_contract_violations"].type == "counter"
