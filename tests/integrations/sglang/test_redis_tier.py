"""kvcontract's Redis tier as SGLang's storage: pages one backend stores, another (a new instance) loads byte-exact from a real Redis.

The server is the Redis tests' own (``tests/tiers/redis/support.py``), started for this
module; without redis-server or redis-py the test skips with their one reason, and
``KVCONTRACT_REQUIRE=redis`` makes that a failure.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvcontract.tiers import RedisTier
from tests.integrations.sglang.support import (
    PAGE,
    PoolName,
    backend,
    fill_pool_random,
    fill_random,
    hybrid_backend,
    keys_for,
    mamba_pool,
    mha_pool,
    page_bytes,
    pages_reach_a_new_instance,
    storage_config,
    transfer,
)
from tests.tiers.redis.support import lru_server_or_skip


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = lru_server_or_skip(tmp_path_factory.mktemp("redis"))
    yield server.url
    server.stop()


@pytest.mark.parametrize("layout", ["page_first", "layer_first"])
def test_pages_stored_in_redis_reach_a_new_instance_byte_exact(redis_url: str, tmp_path: Path, layout: str) -> None:
    tier: dict[str, object] = {"kind": "redis", "url": redis_url, "namespace": f"sglang-{layout}", "io_threads": 2}
    pages_reach_a_new_instance(tmp_path, layout, tier, RedisTier)


def test_a_hybrid_models_pools_stored_in_redis_reach_a_new_instance_byte_exact(redis_url: str, tmp_path: Path) -> None:
    tier: dict[str, object] = {"kind": "redis", "url": redis_url, "namespace": "sglang-hybrid", "io_threads": 2}
    config = storage_config(tmp_path, tier=tier)
    kv, swa, mamba = mha_pool("page_first"), mha_pool("page_first"), mamba_pool()
    store = hybrid_backend(kv, config, {"swa": swa, "mamba": mamba})
    keys = keys_for("redis-hybrid", 3)
    indices = {"kv": kv.alloc(3 * PAGE), "swa": swa.alloc(2 * PAGE), "mamba": mamba.alloc(1)}
    fill_random(kv, seed=1)
    fill_pool_random(swa, seed=2)
    fill_pool_random(mamba, seed=3)
    side = {"swa": (swa, keys[-2:]), "mamba": (mamba, keys[-1:])}
    expected = {name: [page_bytes(pool, int(indices[name][i * pool.page_size])) for i in range(len(named))]
                for name, (pool, named) in side.items()}  # fmt: skip
    assert store.batch_set_v1(keys, indices["kv"]) == [True] * 3
    stored = store.batch_set_v2([transfer(name, named, indices[name]) for name, (_, named) in side.items()])
    assert stored == {PoolName.SWA: [True, True], PoolName.MAMBA: [True]}
    store.close()
    kv2, swa2, mamba2 = mha_pool("page_first"), mha_pool("page_first"), mamba_pool()
    again = hybrid_backend(kv2, config, {"swa": swa2, "mamba": mamba2})
    asked = [transfer(name, named, None, "trailing_pages") for name, (_, named) in side.items()]
    assert again.batch_exists_v2(keys, asked).kv_hit_pages == 3  # Redis answers RETRY first: asked again until known
    targets = {"swa": swa2.alloc(2 * PAGE), "mamba": mamba2.alloc(1)}
    loaded = again.batch_get_v2([transfer(name, named, targets[name]) for name, (_, named) in side.items()])
    assert loaded == {PoolName.SWA: [True, True], PoolName.MAMBA: [True]}
    pools = {"swa": swa2, "mamba": mamba2}
    for name, (_, named) in side.items():
        pool = pools[name]
        assert [page_bytes(pool, int(targets[name][i * pool.page_size])) for i in range(len(named))] == expected[name]
    again.close()


@pytest.mark.parametrize("layout", ["page_first", "layer_first"])
def test_calls_on_a_frozen_redis_return_within_their_bound(tmp_path: Path, layout: str) -> None:
    """Regression: with Redis stopped by SIGSTOP, a batch_set_v1 of 12 pages took 3 s with ``timeout_seconds: 1``
    (each queued job waited out its own socket timeout); now the first calls time out and the rest fail at once."""
    server = lru_server_or_skip(tmp_path / "redis")
    try:
        tier: dict[str, object] = {"kind": "redis", "url": server.url, "namespace": "frozen", "io_threads": 2,
                                   "socket_timeout": 1.0, "connect_timeout": 1.0}  # fmt: skip
        pool = mha_pool(layout)
        config = storage_config(tmp_path, layout=layout, tier=tier)
        store = backend(pool, config)
        indices = pool.alloc(12 * PAGE)
        fill_random(pool, seed=9)
        server.freeze()
        for call in (store.batch_set_v1, store.batch_get_v1):
            started = time.monotonic()
            answers = call(keys_for("frozen", 12), indices)
            seconds = time.monotonic() - started
            assert answers == [False] * 12
            assert seconds < 2.5, f"{call.__name__} of 12 pages took {seconds:.1f} s on a frozen server"
        server.thaw()
        store.close()
    finally:
        server.stop()
