"""The worker round trip on CUDA KV caches: kvcontract's CUDA copy path under vLLM's worker calls."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.integrations.vllm.support import model_dir, round_trip

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (tools/device_check.sh)")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_dir(tmp_path_factory.mktemp("tiny-llama"))


@pytest.mark.parametrize("blocks_per_chunk", [1, 2])
def test_cuda_store_then_load_is_byte_exact(model: Path, blocks_per_chunk: int) -> None:
    round_trip(model, torch.device("cuda"), blocks_per_chunk=blocks_per_chunk)
