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
from tests.integrations.sglang.support import pages_reach_a_new_instance
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
    pages_reach_a_new_instance(tmp_path, layout, tier, MooncakeTier)
