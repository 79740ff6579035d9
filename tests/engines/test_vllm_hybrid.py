"""A model whose layers are not all alike inside vLLM's engine: sliding-window layers between global ones.

vLLM keeps a KV-cache group per kind of layer (Gemma-2-shaped: sliding window of 64 tokens, then
full attention, alternating); kvcontract offloads and restores every group, and every token
equals the engine's own without offloading.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.engines.conftest import RunEngine
from tests.engines.support import EngineRun, Pass, TinyModel, assert_exact_and_loaded, offload, shared_prefix_prompts


def test_a_sliding_window_model_offloads_and_restores_every_group_exactly(
    engine: RunEngine, without_offloading: Callable[[EngineRun], list[Pass]], tmp_path: Path
) -> None:
    model = TinyModel(layers=4, sliding_window=64)
    path = model.save(tmp_path / "gemma2")
    prompts = shared_prefix_prompts()
    run = EngineRun(str(path), offload(manager={"capacity": "64MiB"}), [prompts, prompts], gpu_blocks=128)
    assert_exact_and_loaded(engine(run), without_offloading(run))
