"""kvcontract's Mooncake tier behind vLLM's ``SecondaryTierManager``, created by vLLM's own tier factory, on a real store.

The store is the Mooncake tests' own (``tests/tiers/mooncake/support.py``), started for this
module; without Mooncake's client the test skips with their one reason, and
``KVCONTRACT_REQUIRE=mooncake`` makes that a failure.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from vllm.v1.kv_offload.base import LookupResult, ReqContext

from kvcontract.tiers import MooncakeTier
from tests.integrations.vllm.test_secondary_tier import CHUNK_BYTES, CHUNKS, finished, job, keys, make_tier
from tests.tiers.mooncake.support import MooncakeStore, store_or_skip


@pytest.fixture(scope="module")
def mooncake_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MooncakeStore]:
    store = store_or_skip(tmp_path_factory.mktemp("mooncake"))
    yield store
    store.close()


def test_vllm_stores_and_loads_through_a_mooncake_tier(mooncake_store: MooncakeStore) -> None:
    primary = np.random.default_rng(0).integers(0, 256, (CHUNKS, CHUNK_BYTES), dtype=np.uint8)
    tier = make_tier(primary, tier={**mooncake_store.tier_config(), "namespace": "vllm-tier", "lookup_timeout": 10.0})
    try:
        assert isinstance(tier.tier, MooncakeTier)
        stored = keys(1, 2)
        tier.submit_store(job(1, stored, [0, 1]))
        assert finished(tier, 1).success
        assert [tier.lookup(key, ReqContext("r")) for key in stored] == [LookupResult.HIT] * 2
        tier.submit_load(job(2, stored, [5, 6]))
        result = finished(tier, 2)
        assert result.success and result.transfer_bytes == 2 * CHUNK_BYTES
        assert np.array_equal(primary[5:7], primary[0:2])
    finally:
        tier.shutdown()
