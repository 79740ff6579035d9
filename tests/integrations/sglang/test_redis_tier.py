"""kvcontract's Redis tier as SGLang's storage: pages one backend stores, another (a new instance) loads byte-exact from a real Redis.

The server is the Redis tests' own (``tests/tiers/redis/support.py``), started for this
module; without redis-server or redis-py the test skips with their one reason, and
``KVCONTRACT_REQUIRE=redis`` makes that a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kvcontract.tiers import RedisTier
from tests.integrations.sglang.support import pages_reach_a_new_instance
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
