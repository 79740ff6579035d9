"""kvcontract's Mooncake tier as SGLang's storage: pages one backend stores, another (a new instance) loads byte-exact from a real Mooncake Store.

The store is the Mooncake tests' own (``tests/tiers/mooncake/support.py``), started for this
module; without Mooncake's client the test skips with their one reason, and
``KVCONTRACT_REQUIRE=mooncake`` makes that a failure (as ``KVCONTRACT_REQUIRE=sglang`` does
for SGLang, through this folder's conftest).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kvcontract.tiers import MooncakeTier
from tests.integrations.sglang.support import PAGE, backend, fill_random, keys_for, mha_pool, page_bytes, storage_config
from tests.tiers.mooncake.support import MooncakeStore, store_or_skip


@pytest.fixture(scope="module")
def mooncake_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MooncakeStore]:
    store = store_or_skip(tmp_path_factory.mktemp("mooncake"))
    yield store
    store.close()


@pytest.mark.parametrize("layout", ["page_first", "layer_first"])
def test_pages_stored_in_mooncake_reach_a_new_instance_byte_exact(
    mooncake_store: MooncakeStore, tmp_path: Path, layout: str
) -> None:
    tier: dict[str, object] = {**mooncake_store.tier_config(), "namespace": f"sglang-{layout}", "io_threads": 2}
    pool = mha_pool(layout)
    store = backend(pool, storage_config(tmp_path, layout=layout, tier=tier))
    assert isinstance(store.tier, MooncakeTier)
    indices = pool.alloc(3 * PAGE)
    fill_random(pool, seed=23)
    keys = keys_for(f"mooncake-{layout}", 3)
    expected = [page_bytes(pool, int(indices[i * PAGE])) for i in range(3)]
    assert store.batch_set_v1(keys, indices) == [True] * 3
    store.close()
    again_pool = mha_pool(layout)
    again = backend(again_pool, storage_config(tmp_path, layout=layout, tier=tier))
    targets = again_pool.alloc(3 * PAGE)
    assert again.batch_exists(keys) == 3
    assert again.batch_get_v1(keys, targets) == [True] * 3
    assert [page_bytes(again_pool, int(targets[i * PAGE])) for i in range(3)] == expected
    stranger = backend(mha_pool(layout), storage_config(tmp_path, layout=layout, tier=tier, model="org/other"))
    assert stranger.batch_exists(keys) == 0
    again.close()
    stranger.close()
