"""kvcontract's Redis tier under vLLM's scheduler: a block evicted from host memory comes back from a real Redis.

The server is the Redis tests' own (``tests/tiers/redis/support.py``), started for this
module; without redis-server or redis-py the test skips with their one reason, and
``KVCONTRACT_REQUIRE=redis`` makes that a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kvcontract.integrations.vllm import KVContractOffloadingManager
from kvcontract.managers import TieringOffloadingManager
from kvcontract.tiers import RedisTier
from tests.integrations.vllm.support import BLOCK_TOKENS, SPEC_PATH, Engine, model_dir, vllm_config
from tests.tiers.redis.support import lru_server_or_skip

GPU_BLOCKS = 64
PROMPT_A = list(range(100))
PROMPT_C = list(range(1000, 1100))


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = lru_server_or_skip(tmp_path_factory.mktemp("redis"))
    yield server.url
    server.stop()


def test_a_block_evicted_from_host_memory_is_promoted_back_from_redis_byte_exact(
    redis_url: str, tmp_path: Path
) -> None:
    kvcontract = {
        "kv_layout": {"num_layers": 2, "num_kv_heads": 2, "head_dim": 16, "dtype": "float16"},
        "manager": {
            "kind": "tiering",
            "primary": {"capacity": 6},
            "secondary": [{"kind": "redis", "url": redis_url, "namespace": "vllm-scheduler", "io_threads": 2}],
        },
        "transfer": {"shared_memory_path": str(tmp_path / "host.shm")},
    }
    config = vllm_config(model_dir(tmp_path / "model"), {**SPEC_PATH, "kvcontract": kvcontract}, num_blocks=GPU_BLOCKS)
    served = Engine(config, GPU_BLOCKS, with_worker=True)
    manager = served.manager
    assert isinstance(manager, KVContractOffloadingManager)
    tiering = manager.inner
    assert isinstance(tiering, TieringOffloadingManager)
    assert isinstance(tiering.tiers[0], RedisTier)
    try:
        first = served.run("a", PROMPT_A)
        stored = [cache[first.stored].clone() for cache in served.caches.values()]
        served.run("c", PROMPT_C)  # evicts A from host memory; Redis keeps it
        served.drop_gpu_prefix_cache()
        for cache in served.caches.values():
            cache.zero_()
        again = served.run("a2", PROMPT_A)
        assert again.hit_tokens == 6 * BLOCK_TOKENS
        tier_stats = tiering.stats().tiers[0]
        assert tier_stats.written == 12 and tier_stats.promoted == 6
        for before, cache in zip(stored, served.caches.values()):
            assert torch.equal(before, cache[again.loaded])
    finally:
        manager.shutdown()
