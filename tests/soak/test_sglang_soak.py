"""Soak: SGLang's backend on a Redis tier sets 12,000 pages and holds no more memory than at 3,000 (within 1.5x).

SGLang never takes events; the backend's tier is built from its config section, so it keeps
none, and remembers at most ``known_keys`` keys. Measured with ``tracemalloc`` after
collecting garbage, from just before the backend was attached.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest

from tests.integrations.sglang.conftest import SGLANG_MISSING
from tests.required_parts import skip_unless_required
from tests.tiers.redis.support import lru_server_or_skip

pytestmark = pytest.mark.soak

PAGES_PER_CALL = 8
FIRST = 3_000
SECOND = 12_000
GROWTH_LIMIT = 1.5


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def test_the_sglang_backend_keeps_its_memory_flat(tmp_path: Path) -> None:
    if SGLANG_MISSING is not None:
        skip_unless_required("sglang", SGLANG_MISSING)
    first, second = soak_backend(tmp_path)
    assert second <= GROWTH_LIMIT * first, f"traced memory {first} bytes at {FIRST} pages, {second} at {SECOND}"


def soak_backend(tmp_path: Path) -> tuple[int, int]:
    """Bytes traced at ``FIRST`` and at ``SECOND`` pages set, counted from just before the backend was attached."""
    from tests.integrations.sglang.support import PAGE, backend, fill_random, mha_pool, storage_config

    server = lru_server_or_skip(tmp_path / "redis")
    try:
        pool = mha_pool("page_first")
        tier: dict[str, object] = {"kind": "redis", "url": server.url, "namespace": "soak", "io_threads": 2,
                                   "known_keys": 1024}  # fmt: skip
        config = storage_config(tmp_path, tier=tier)
        indices = pool.alloc(PAGES_PER_CALL * PAGE)
        fill_random(pool, seed=1)
        stored = 0
        tracemalloc.start()
        try:
            start = _traced()
            store = backend(pool, config)
            try:
                measured: list[int] = []
                for target in (FIRST, SECOND):
                    while stored < target:
                        keys = [f"soak-{stored + i}" for i in range(PAGES_PER_CALL)]
                        assert store.batch_set_v1(keys, indices) == [True] * PAGES_PER_CALL
                        stored += PAGES_PER_CALL
                    measured.append(_traced() - start)
            finally:
                store.close()
        finally:
            tracemalloc.stop()
    finally:
        server.stop()
    return measured[0], measured[1]
