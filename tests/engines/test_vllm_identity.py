"""Blocks of one model never reach another inside vLLM's engine, even at the same path.

Each engine writes its prompts' blocks to one file tier; the next engine runs another model on
it. With nothing set, the identity covers the model's name and what its directory holds, so the
second engine finds nothing and computes its own output. The control forces one revision on
both (what a user's ``identity.revision`` would say): then the first model's KV loads and the
outputs differ from the second model's own, so the comparison bites.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.engines.support import EXTERNAL_HITS, EngineRun, Pass, RunEngine, TinyModel, differing, shared_prefix_prompts
from tests.engines.test_vllm_tiers import tiering

PROMPTS = shared_prefix_prompts(groups=2)


def file_tiering(model: TinyModel, tmp_path: Path, shm: Path, revision: str = "") -> dict[str, Any]:
    config = tiering(model, shm, {"kind": "file", "path": str(tmp_path / "tier"), "capacity": 256})
    if revision:
        config["kvcontract"]["identity"] = {"revision": revision}
    return config


def second_engine_output(first: Path, second: Path, config: dict[str, Any], engine: RunEngine) -> Pass:
    """The first model fills the tier, then the second model's engine runs the same prompts on it."""
    engine(EngineRun(str(first), config, [PROMPTS]))
    (only,) = engine(EngineRun(str(second), config, [PROMPTS]))
    return only


def test_another_model_of_the_same_shape_finds_none_of_the_first_s_blocks(
    engine: RunEngine, without_offloading: Callable[[EngineRun], list[Pass]], tmp_path: Path, shm: Path
) -> None:
    first, second = TinyModel(seed=1), TinyModel(seed=2)
    first_path, second_path = first.save(tmp_path / "first"), second.save(tmp_path / "second")
    output = second_engine_output(first_path, second_path, file_tiering(first, tmp_path, shm), engine)
    (own,) = without_offloading(EngineRun(str(second_path), None, [PROMPTS]))
    assert output.counter(EXTERNAL_HITS) == 0
    assert differing(output.tokens, own.tokens) == []


def test_other_weights_at_the_same_path_find_none_of_the_old_blocks(
    engine: RunEngine, without_offloading: Callable[[EngineRun], list[Pass]], tmp_path: Path, shm: Path
) -> None:
    path = tmp_path / "model"
    old, new = TinyModel(seed=1), TinyModel(seed=2)
    config = file_tiering(old, tmp_path, shm)
    engine(EngineRun(str(old.save(path)), config, [PROMPTS]))
    (output,) = engine(EngineRun(str(new.save(path)), config, [PROMPTS]))
    (own,) = without_offloading(EngineRun(str(path), None, [PROMPTS]))
    assert output.counter(EXTERNAL_HITS) == 0
    assert differing(output.tokens, own.tokens) == []


def test_control_one_forced_revision_loads_the_old_weights_kv_and_changes_outputs(
    engine: RunEngine, without_offloading: Callable[[EngineRun], list[Pass]], tmp_path: Path, shm: Path
) -> None:
    path = tmp_path / "model"
    old, new = TinyModel(seed=1), TinyModel(seed=2)
    config = file_tiering(old, tmp_path, shm, revision="forced")
    engine(EngineRun(str(old.save(path)), config, [PROMPTS]))
    (output,) = engine(EngineRun(str(new.save(path)), config, [PROMPTS]))
    (own,) = without_offloading(EngineRun(str(path), None, [PROMPTS]))
    assert output.counter(EXTERNAL_HITS) > 0
    assert differing(output.tokens, own.tokens) != []
