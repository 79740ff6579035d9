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
    backend,
    fill_random,
    keys_for,
    mha_pool,
    pages_reach_a_new_instance,
    storage_config,
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
