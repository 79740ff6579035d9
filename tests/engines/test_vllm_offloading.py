"""kvcontract inside vLLM's engine: every generated token equal to the engine without offloading.

The prompts share long prefixes; vLLM's own prefix cache is emptied between the two passes, so
whatever the second pass does not compute again it loads from kvcontract. A control that zeroes
every block kvcontract loads must change an output: it shows the comparison bites.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.engines.conftest import RunEngine
from tests.engines.support import EngineRun, Pass, TinyModel, differing, offload, shared_prefix_prompts

PROMPTS = shared_prefix_prompts()
LOADED = "vllm:kv_offload_load_bytes"
STORED = "vllm:kv_offload_store_bytes"
EXTERNAL_HITS = "vllm:external_prefix_cache_hits"


def shared_memory(tmp_path: Path) -> Path:
    """A host-memory file the engine's scheduler maps (its tiers read the worker's host blocks): in /dev/shm."""
    return Path("/dev/shm") / f"kvcontract-test-{uuid.uuid4().hex}"


def assert_exact_and_loaded(passes: list[Pass], reference: list[Pass]) -> None:
    """Every token of every pass as without offloading, and the second pass loaded blocks from kvcontract."""
    for number, (got, want) in enumerate(zip(passes, reference, strict=True)):
        assert differing(got.tokens, want.tokens) == [], (
            f"pass {number}: outputs differ from the engine without offloading"
        )
    first, second = passes
    assert first.counter(STORED) > 0
    assert second.counter(LOADED) > first.counter(LOADED)
    assert second.counter(EXTERNAL_HITS) > first.counter(EXTERNAL_HITS)


@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_the_cpu_manager_is_exact(
    tiny_model: tuple[TinyModel, object],
    engine: RunEngine,
    without_offloading: Callable[[EngineRun], list[Pass]],
    policy: str,
) -> None:
    _, path = tiny_model
    run = EngineRun(str(path), offload(manager={"capacity": "64MiB", "policy": {"kind": policy}}), [PROMPTS, PROMPTS])
    assert_exact_and_loaded(engine(run), without_offloading(run))


def test_the_reuse_filter_is_exact(
    tiny_model: tuple[TinyModel, object], engine: RunEngine, without_offloading: Callable[[EngineRun], list[Pass]]
) -> None:
    _, path = tiny_model
    manager = {"capacity": "64MiB", "admission": {"kind": "reuse", "store_threshold": 2}}
    run = EngineRun(str(path), offload(manager=manager), [PROMPTS, PROMPTS])
    assert_exact_and_loaded(engine(run), without_offloading(run))


def test_a_control_that_zeroes_loaded_blocks_changes_outputs(
    tiny_model: tuple[TinyModel, object], engine: RunEngine, without_offloading: Callable[[EngineRun], list[Pass]]
) -> None:
    _, path = tiny_model
    run = EngineRun(str(path), offload(manager={"capacity": "64MiB"}), [PROMPTS, PROMPTS], control="zero_loaded_blocks")
    first, second = engine(run)
    reference = without_offloading(run)
    assert differing(first.tokens, reference[0].tokens) == []
    assert second.counter(LOADED) > 0
    assert differing(second.tokens, reference[1].tokens) != []


def tiering(model: TinyModel, shm: Path, secondary: dict[str, object], host_blocks: int = 16) -> dict[str, Any]:
    """kvcontract's spec with a tiering manager: ``host_blocks`` of host memory over the tier ``secondary``."""
    return offload(
        kv_layout=model.kv_layout(),
        manager={"kind": "tiering", "primary": {"capacity": host_blocks}, "secondary": [secondary]},
        transfer={"shared_memory_path": str(shm)},
    )


def test_tiering_over_the_file_tier_is_exact(
    tiny_model: tuple[TinyModel, Path],
    engine: RunEngine,
    without_offloading: Callable[[EngineRun], list[Pass]],
    tmp_path: Path,
) -> None:
    model, path = tiny_model
    config = tiering(model, shared_memory(tmp_path), {"kind": "file", "path": str(tmp_path / "tier"), "capacity": 256})
    run = EngineRun(str(path), config, [PROMPTS, PROMPTS])
    assert_exact_and_loaded(engine(run), without_offloading(run))
