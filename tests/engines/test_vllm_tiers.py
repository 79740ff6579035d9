"""kvcontract's tiers below host memory inside vLLM's engine, and engines that restart on them.

Host memory holds 16 blocks, fewer than the prompts' 48, so the second pass loads most of its
prefixes from the tier. A restarted engine (a new process on the same file root or the same
Redis) must load in its first pass every block the tier holds for its prompts: vLLM looks up
every waiting request at once, and the promotions must wait for host room rather than miss.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.engines.support import (
    EXTERNAL_HITS,
    EXTERNAL_QUERIES,
    EngineRun,
    Pass,
    RunEngine,
    TinyModel,
    assert_exact_and_loaded,
    differing,
    offload,
    shared_prefix_prompts,
)
from tests.tiers.mooncake.support import store_or_skip
from tests.tiers.redis.support import lru_server_or_skip

PROMPTS = shared_prefix_prompts()
HOST_BLOCKS = 16


def tiering(model: TinyModel, shm: Path, secondary: Mapping[str, object]) -> dict[str, Any]:
    """kvcontract's spec with a tiering manager: ``HOST_BLOCKS`` of host memory over the tier ``secondary``."""
    return offload(
        kv_layout=model.kv_layout(),
        manager={"kind": "tiering", "primary": {"capacity": HOST_BLOCKS}, "secondary": [secondary]},
        transfer={"shared_memory_path": str(shm)},
    )


@pytest.fixture
def tier(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, object]]:
    """The config of a tier of the kind the test is parametrized with, on a server of its own where it needs one."""
    kind: str = request.param
    if kind == "file":
        yield {"kind": "file", "path": str(tmp_path / "tier"), "capacity": 256}
    elif kind == "redis":
        server = lru_server_or_skip(tmp_path / "redis")
        yield {"kind": "redis", "url": server.url}
        server.stop()
    else:
        store = store_or_skip(tmp_path / "mooncake")
        yield store.tier_config()
        store.close()


@pytest.mark.parametrize("tier", ["file", "redis", "mooncake"], indirect=True)
def test_tiering_is_exact(
    tiny_model: tuple[TinyModel, Path],
    engine: RunEngine,
    without_offloading: Callable[[EngineRun], list[Pass]],
    tier: dict[str, object],
    shm: Path,
) -> None:
    model, path = tiny_model
    run = EngineRun(str(path), tiering(model, shm, tier), [PROMPTS, PROMPTS])
    assert_exact_and_loaded(engine(run), without_offloading(run))


@pytest.mark.parametrize("tier", ["file", "redis"], indirect=True)
def test_a_restarted_engine_loads_every_block_its_tier_holds(
    tiny_model: tuple[TinyModel, Path],
    engine: RunEngine,
    without_offloading: Callable[[EngineRun], list[Pass]],
    tier: dict[str, object],
    shm: Path,
) -> None:
    """A first engine fills the tier; a second, new process loads every block of its prompts in its first pass."""
    model, path = tiny_model
    config = tiering(model, shm, tier)
    engine(EngineRun(str(path), config, [PROMPTS]))
    restarted = EngineRun(str(path), config, [PROMPTS])
    (first,) = engine(restarted)
    (reference,) = without_offloading(restarted)
    assert differing(first.tokens, reference.tokens) == []
    assert first.counter(EXTERNAL_QUERIES) > 0
    assert first.counter(EXTERNAL_HITS) == first.counter(EXTERNAL_QUERIES), (
        "the restarted engine computed blocks its tier held"
    )
