"""vLLM's worker-side connector registers canonical KV caches; kvcontract's worker moves their bytes exactly.

The jobs are submitted through vLLM's ``OffloadingWorker`` calls with vLLM's own GPU specs,
on CPU tensors shaped as vLLM's canonical KV caches (and on CUDA in test_cuda.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.integrations.vllm.support import model_dir, round_trip


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_dir(tmp_path_factory.mktemp("tiny-llama"))


def test_store_then_load_is_byte_exact(model: Path) -> None:
    round_trip(model, torch.device("cpu"), blocks_per_chunk=1)


def test_offload_blocks_of_several_gpu_blocks_and_an_unaligned_load(model: Path) -> None:
    round_trip(model, torch.device("cpu"), blocks_per_chunk=2)
