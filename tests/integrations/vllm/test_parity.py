"""The same requests through vLLM's own CPU manager and through the kvcontract-backed one.

Both run under vLLM's real scheduler with the same host capacity; the scheduler-side
outcome of every request (offload hits, blocks stored, blocks loaded) must be the same.
vLLM's CPU worker needs CUDA, so here the worker's job reports come from vLLM's own
worker metadata for both; the bytes are compared in test_scheduler.py (kvcontract's
worker) and, with a GPU, in test_cuda.py. Differences kvcontract makes on purpose are
listed in docs/vllm.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrations.vllm.support import LAYERS, PAGE_BYTES, SPEC_PATH, Engine, RunLog, model_dir, vllm_config

GPU_BLOCKS = 64
HOST_BLOCKS = 8


def prompt(number: int, blocks: int = 6) -> list[int]:
    return [number * 10_000 + token for token in range(blocks * 16 + 4)]


SCENARIOS = {
    "hits": [prompt(1), prompt(1), prompt(1)],
    "evictions": [prompt(1), prompt(2), prompt(1), prompt(3)],
    "shared prefix": [prompt(1), prompt(1, 3), prompt(1, 7), prompt(4, 2), prompt(1)],
    "refused": [prompt(1, 9), prompt(2), prompt(1, 9), prompt(2)],
}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_dir(tmp_path_factory.mktemp("tiny-llama"))


def serve(model: Path, extra: dict[str, object], prompts: list[list[int]]) -> list[tuple[int, int, int]]:
    engine = Engine(vllm_config(model, extra, num_blocks=GPU_BLOCKS), GPU_BLOCKS, with_worker=False)
    outcome: list[tuple[int, int, int]] = []
    for number, tokens in enumerate(prompts):
        engine.drop_gpu_prefix_cache()
        log: RunLog = engine.run(str(number), tokens)
        outcome.append((log.hit_tokens, len(log.stored), len(log.loaded)))
    return outcome


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_vllm_cpu_manager_and_kvcontract_agree(model: Path, scenario: str) -> None:
    host_bytes = HOST_BLOCKS * PAGE_BYTES * len(LAYERS)
    vllm_own = serve(model, {"cpu_bytes_to_use": host_bytes}, SCENARIOS[scenario])
    kvcontract = serve(model, {**SPEC_PATH, "cpu_bytes_to_use": host_bytes}, SCENARIOS[scenario])
    assert kvcontract == vllm_own
