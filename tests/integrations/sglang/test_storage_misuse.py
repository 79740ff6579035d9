"""SGLang's calls out of order or with bad arguments: one clear error or a safe answer, never a traceback or a leak."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from kvcontract.config import ConfigError
from tests.integrations.sglang.support import PAGE, backend, fill_random, keys_for, mha_pool, storage_config


def test_a_second_register_mem_pool_host_is_one_clear_error(tmp_path: Path) -> None:
    """Regression: a second registration built a second tier and left the first running with its pages reserved."""
    pool = mha_pool("page_first")
    store = backend(pool, storage_config(tmp_path))
    first = store.tier
    with pytest.raises(RuntimeError, match="register_mem_pool_host was called again"):
        store.register_mem_pool_host(pool)
    assert store.tier is first
    store.close()


def test_calls_before_registration_say_so(tmp_path: Path) -> None:
    import importlib

    factory = importlib.import_module("sglang.srt.mem_cache.storage.backend_factory").StorageBackendFactory
    pool = mha_pool("page_first")
    store = factory.create_backend("dynamic", storage_config(tmp_path), pool)
    indices = torch.arange(PAGE)
    for call in (store.batch_get_v1, store.batch_set_v1):
        with pytest.raises(RuntimeError, match="has not registered its host pool yet"):
            call(keys_for("early", 1), indices)


def test_host_indices_that_do_not_start_a_page_are_refused(tmp_path: Path) -> None:
    """Regression: indices off a page start were floored silently, moving another page's bytes."""
    pool = mha_pool("page_first")
    store = backend(pool, storage_config(tmp_path))
    indices = pool.alloc(2 * PAGE)
    fill_random(pool, seed=3)
    with pytest.raises(ValueError, match="a multiple of page_size"):
        store.batch_set_v1(keys_for("off", 1), indices[1 : 1 + PAGE])
    with pytest.raises(ValueError, match="token indices per key"):
        store.batch_set_v1(keys_for("short", 2), indices[:PAGE])
    store.close()


def test_batch_exists_after_close_answers_no_hit(tmp_path: Path) -> None:
    """Regression: a closed backend answered hits for pages it could no longer load."""
    pool = mha_pool("page_first")
    store = backend(pool, storage_config(tmp_path))
    indices = pool.alloc(2 * PAGE)
    fill_random(pool, seed=5)
    keys = keys_for("closed", 2)
    assert store.batch_set_v1(keys, indices) == [True, True]
    assert store.batch_exists(keys) == 2
    store.close()
    assert store.batch_exists(keys) == 0
    assert store.batch_get_v1(keys, indices) == [False, False]


def test_the_old_calls_refuse_a_tensor_that_is_not_one_page(tmp_path: Path) -> None:
    """Regression: get and set with a tensor of the wrong size ended in a traceback from deep inside the copy."""
    pool = mha_pool("page_first")
    store = backend(pool, storage_config(tmp_path))
    with pytest.raises(ValueError, match="give one page"):
        store.set(keys_for("small", 1)[0], torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(ValueError, match="give one page"):
        store.get(keys_for("small", 1)[0], torch.zeros(3, dtype=torch.uint8))
    store.close()


def test_batch_exists_with_bytes_keys_is_one_clear_error(tmp_path: Path) -> None:
    pool = mha_pool("page_first")
    store = backend(pool, storage_config(tmp_path))
    bytes_keys: list[Any] = [b"abc"]  # the mistake under test
    with pytest.raises(TypeError, match="as str, got bytes"):
        store.batch_exists(bytes_keys)
    store.close()


def test_staging_pages_past_the_limit_are_refused_naming_the_key(tmp_path: Path) -> None:
    pool = mha_pool("page_first")
    with pytest.raises(ConfigError, match="kvcontract.staging_pages: give a whole number of pages from 1 to"):
        backend(
            pool,
            storage_config(
                tmp_path,
                extra={
                    "kvcontract": {
                        "tier": {"kind": "file", "path": str(tmp_path), "capacity": "4MiB"},
                        "staging_pages": 10**12,
                    }
                },
            ),
        )


def test_a_page_count_below_one_is_reported_as_given(tmp_path: Path) -> None:
    """Regression: ``capacity: -5`` (pages) was reported as "-10", the blocks it was scaled to."""
    tier: dict[str, object] = {"kind": "file", "path": str(tmp_path), "capacity": -5}
    with pytest.raises(ConfigError, match="kvcontract.tier.capacity: give at least 1 page, got -5"):
        backend(mha_pool("page_first"), storage_config(tmp_path, tier=tier))
