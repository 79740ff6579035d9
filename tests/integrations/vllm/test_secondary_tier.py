"""kvcontract's tiers behind vLLM's ``SecondaryTierManager``, created by vLLM's own tier factory.

The tier reads and writes vLLM's primary host memory (a memoryview of chunk rows); jobs
go in as vLLM's ``TransferJob`` and come back as its ``JobResult``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from vllm.v1.kv_offload.base import LookupResult, Medium, OffloadingSpec, OffloadKey, ReqContext, make_offload_key
from vllm.v1.kv_offload.factory import OffloadingSpecFactory
from vllm.v1.kv_offload.tiering.base import JobResult, SecondaryTierManager, TransferJob
from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory

from kvcontract.config import ConfigError
from kvcontract.integrations.vllm import KVContractSecondaryTier
from kvcontract.tiers import FileTier
from tests.integrations.vllm.support import offloading_config

# vLLM annotates the factory's config as a bare dict; the boundary gets its type here, once.
create_secondary_tier: Callable[[dict[str, object], memoryview, OffloadingSpec], SecondaryTierManager] = getattr(
    SecondaryTierFactory, "create_secondary_tier"
)
CHUNKS = 8
CHUNK_BYTES = 4096


def keys(*numbers: int) -> list[OffloadKey]:
    return [make_offload_key(number.to_bytes(8, "big"), 0) for number in numbers]


def make_tier(primary: np.ndarray, **config: object) -> KVContractSecondaryTier:
    spec = OffloadingSpecFactory.create_spec(offloading_config({"cpu_bytes_to_use": CHUNKS * CHUNK_BYTES}))
    tier_config: dict[str, object] = {
        "type": "KVContractSecondaryTier",
        "module_path": "kvcontract.integrations.vllm",
        **config,
    }
    tier = create_secondary_tier(tier_config, primary.data, spec)
    assert isinstance(tier, KVContractSecondaryTier)
    return tier


def finished(tier: KVContractSecondaryTier, job_id: int) -> JobResult:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for result in tier.get_finished_jobs():
            if result.job_id == job_id:
                return result
        time.sleep(0.002)
    raise AssertionError(f"job {job_id} did not finish")


def job(job_id: int, job_keys: list[OffloadKey], chunks: list[int]) -> TransferJob:
    return TransferJob(
        job_id, job_keys, np.array(chunks, dtype=np.int64), is_promotion=False, req_context=ReqContext("r")
    )


def test_store_then_load_through_vllm_tier_calls(tmp_path: Path) -> None:
    primary = np.random.default_rng(0).integers(0, 256, (CHUNKS, CHUNK_BYTES), dtype=np.uint8)
    tier = make_tier(
        primary,
        tier={"kind": "file", "path": str(tmp_path / "tier"), "capacity": f"{2 * CHUNK_BYTES}B", "enable_events": True},
    )
    try:
        assert isinstance(tier.tier, FileTier) and tier.tier.capacity == 2
        assert tier.config_info() == {"kvcontract_tier": "file", "kvcontract_tier_capacity_blocks": 2}
        assert tuple(tier.config_info()) == KVContractSecondaryTier.config_info_keys({})
        stored = keys(1, 2)
        tier.submit_store(job(1, stored, [0, 1]))
        assert finished(tier, 1).success
        assert [tier.lookup(key, ReqContext("r")) for key in [*stored, *keys(3)]] == [
            LookupResult.HIT,
            LookupResult.HIT,
            LookupResult.MISS,
        ]
        (event,) = tier.take_events()
        assert (event.keys, event.medium, event.removed) == (stored, Medium.STORAGE, False)
        tier.submit_load(job(2, stored, [5, 6]))
        result = finished(tier, 2)
        assert result.success and result.transfer_bytes == 2 * CHUNK_BYTES
        assert np.array_equal(primary[5:7], primary[0:2])
        tier.submit_store(job(3, keys(3), [2]))  # evicts the older of the two
        tier.drain_jobs()
        assert not tier.has_pending_work() or finished(tier, 3).success
        assert sum(tier.lookup(key, ReqContext("r")) is LookupResult.HIT for key in keys(1, 2, 3)) == 2
    finally:
        tier.shutdown()


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"tier": {"kind": "file", "path": "/tmp/x", "capacity": 2}, "colour": "red"}, "colour: unknown key"),
        ({"tier": {"kind": "file", "capacity": 2}}, "tier.path"),
        ({"tier": {"kind": "tape", "capacity": 2}}, "tape"),
        ({}, "tier: give a kvcontract tier config"),
        ({"tier": {"kind": "file", "path": "/tmp/x", "capacity": "1EiB"}}, "tier.capacity: 1EiB is"),
    ],
)
def test_bad_tier_config_names_the_key(config: dict[str, object], named: str) -> None:
    primary = np.zeros((CHUNKS, CHUNK_BYTES), dtype=np.uint8)
    with pytest.raises(ConfigError) as raised:
        make_tier(primary, **config)
    assert named in str(raised.value)
