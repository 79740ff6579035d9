"""kvcontract inside vLLM's engine: every generated token equal to the engine without offloading.

The prompts share long prefixes; vLLM's own prefix cache is emptied between the two passes, so
whatever the second pass does not compute again it loads from kvcontract. A control that zeroes
every block kvcontract loads must change an output: it shows the comparison bites.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.engines.support import (
    LOADED,
    PREEMPTIONS,
    EngineRun,
    Pass,
    RunEngine,
    TinyModel,
    assert_exact_and_loaded,
    differing,
    offload,
    shared_prefix_prompts,
)

PROMPTS = shared_prefix_prompts()


@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_the_cpu_manager_is_exact(
    tiny_model: tuple[TinyModel, Path],
    engine: RunEngine,
    without_offloading: Callable[[EngineRun], list[Pass]],
    policy: str,
) -> None:
    _, path = tiny_model
    run = EngineRun(str(path), offload(manager={"capacity": "64MiB", "policy": {"kind": policy}}), [PROMPTS, PROMPTS])
    assert_exact_and_loaded(engine(run), without_offloading(run))


def test_the_reuse_filter_is_exact(
    tiny_model: tuple[TinyModel, Path], engine: RunEngine, without_offloading: Callable[[EngineRun], list[Pass]]
) -> None:
    _, path = tiny_model
    manager = {"capacity": "64MiB", "admission": {"kind": "reuse", "store_threshold": 2}}
    run = EngineRun(str(path), offload(manager=manager), [PROMPTS, PROMPTS])
    assert_exact_and_loaded(engine(run), without_offloading(run))


def test_a_control_that_zeroes_loaded_blocks_changes_outputs(
    tiny_model: tuple[TinyModel, Path], engine: RunEngine, without_offloading: Callable[[EngineRun], list[Pass]]
) -> None:
    _, path = tiny_model
    run = EngineRun(str(path), offload(manager={"capacity": "64MiB"}), [PROMPTS, PROMPTS], control="zero_loaded_blocks")
    first, second = engine(run)
    reference = without_offloading(run)
    assert differing(first.tokens, reference[0].tokens) == []
    assert second.counter(LOADED) > 0
    assert differing(second.tokens, reference[1].tokens) != []


def test_preempted_requests_resume_exactly(
    tiny_model: tuple[TinyModel, Path], engine: RunEngine, without_offloading: Callable[[EngineRun], list[Pass]]
) -> None:
    """A KV cache of 16 blocks for four requests that share 8 and grow to 3 more each: vLLM preempts and resumes them."""
    _, path = tiny_model
    prompts = shared_prefix_prompts(groups=2, per_group=4)
    run = EngineRun(
        str(path),
        offload(manager={"capacity": "64MiB"}),
        [prompts],
        gpu_blocks=16,
        max_model_len=448,
        max_tokens=64,
        reset_prefix_cache=False,
    )
    (only,) = engine(run)
    (reference,) = without_offloading(run)
    assert only.counter(PREEMPTIONS) > 0
    assert only.counter(LOADED) > 0
    assert differing(only.tokens, reference.tokens) == []


def test_vllm_s_own_cpu_offloading_is_exact_beside_kvcontract(
    tiny_model: tuple[TinyModel, Path], engine: RunEngine, without_offloading: Callable[[EngineRun], list[Pass]]
) -> None:
    """The reference offloading on the same prompts: vLLM's ``CPUOffloadingSpec`` (CUDA only; tools/device_engine.sh)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("vLLM's own CPU offloading runs on CUDA only (tools/device_engine.sh runs this on a GPU)")
    _, path = tiny_model
    run = EngineRun(str(path), {"spec_name": "CPUOffloadingSpec", "cpu_bytes_to_use": 64 << 20}, [PROMPTS, PROMPTS])
    assert_exact_and_loaded(engine(run), without_offloading(run))
