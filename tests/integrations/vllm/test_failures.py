"""Failed transfers through vLLM's real scheduler-side connector: vLLM never publishes a failed store
nor reads a failed load's blocks.

Faults are injected where they happen in use: in kvcontract's worker (its copy raises, so the job
reports ``success=False``) and in a tier (the file tier's blocks corrupted on disk, so their
checksum fails on promotion). vLLM 0.34 carries failed jobs back to the scheduler: a failed store
is ``complete_store(success=False)``, a failed load ends its request under
``kv_load_failure_policy`` (``fail``: an error; ``recompute``: computed again, never loaded again).
vLLM 0.33's connector asserts that every job succeeded, which these tests pin too.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import pytest
from vllm.v1.engine import FinishReason
from vllm.v1.kv_offload.base import LookupResult as VLLMLookupResult
from vllm.v1.kv_offload.base import ReqContext as VLLMReqContext
from vllm.v1.kv_offload.base import make_offload_key

from kvcontract.integrations.vllm import KVContractOffloadingManager
from kvcontract.managers import TieringOffloadingManager
from kvcontract.transfer.copy_engine import Direction
from kvcontract.transfer.mapping import BlockMapping
from kvcontract.transfer.thread_engine import ThreadCopyEngine
from tests.integrations.vllm.support import BLOCK_TOKENS, SPEC_PATH, VLLM_0_34, Engine, model_dir, vllm_config

GPU_BLOCKS = 64
PROMPT_A = list(range(100))
"""Six full blocks of 16 tokens and a partial one (never offloaded)."""
PROMPT_C = list(range(1000, 1100))
POLICIES: list[Literal["recompute", "fail"]] = ["recompute", "fail"]
needs_0_34 = pytest.mark.skipif(
    not VLLM_0_34, reason="vLLM before 0.34 (0.33, 0.32): its connector asserts every transfer succeeded"
)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_dir(tmp_path_factory.mktemp("tiny-llama"))


def engine(model: Path, kvcontract: Mapping[str, object], policy: Literal["recompute", "fail"]) -> Engine:
    config = vllm_config(
        model, {**SPEC_PATH, "kvcontract": kvcontract}, num_blocks=GPU_BLOCKS, load_failure_policy=policy
    )
    return Engine(config, GPU_BLOCKS, with_worker=True)


def fail_copies(monkeypatch: pytest.MonkeyPatch, direction: Direction) -> None:
    """kvcontract's CPU copy engine raises on every job of ``direction``: the worker reports it failed."""
    run = ThreadCopyEngine.run

    def failing(self: ThreadCopyEngine, moving: Direction, mapping: BlockMapping) -> None:
        if moving is direction:
            raise OSError(f"injected {direction.value} fault")
        run(self, moving, mapping)

    monkeypatch.setattr(ThreadCopyEngine, "run", failing)


def held(served: Engine, prompt: list[int]) -> list[VLLMLookupResult]:
    """What the manager answers for each full block of ``prompt`` (the keys vLLM's scheduler makes)."""
    request = served.request("probe", prompt)
    context = VLLMReqContext(req_id="probe")
    return [served.manager.lookup(make_offload_key(block_hash, 0), context) for block_hash in request.block_hashes]


@needs_0_34
@pytest.mark.parametrize("policy", POLICIES)
def test_a_failed_store_is_never_published(
    model: Path, monkeypatch: pytest.MonkeyPatch, policy: Literal["recompute", "fail"]
) -> None:
    served = engine(model, {"manager": {"capacity": 16}}, policy)
    fail_copies(monkeypatch, Direction.STORE)
    first = served.run("a", PROMPT_A)
    assert len(first.stored) == 6 and served.finish_reasons["a"] is FinishReason.LENGTH
    manager = served.manager
    assert isinstance(manager, KVContractOffloadingManager)
    assert manager.inner.stats().used == 0  # complete_store(success=False) freed every block
    assert set(held(served, PROMPT_A)) == {VLLMLookupResult.MISS}
    monkeypatch.undo()
    served.drop_gpu_prefix_cache()
    again = served.run("b", PROMPT_A)
    assert again.hit_tokens == 0 and served.finish_reasons["b"] is FinishReason.LENGTH


@needs_0_34
@pytest.mark.parametrize("policy", POLICIES)
def test_a_failed_load_ends_its_request_as_the_policy_says(
    model: Path, monkeypatch: pytest.MonkeyPatch, policy: Literal["recompute", "fail"]
) -> None:
    served = engine(model, {"manager": {"capacity": 16}}, policy)
    served.run("a", PROMPT_A)
    served.drop_gpu_prefix_cache()
    fail_copies(monkeypatch, Direction.LOAD)
    again = served.run("b", PROMPT_A)
    assert len(again.loaded) == 6  # the load was scheduled, then failed in the worker
    expected = FinishReason.LENGTH if policy == "recompute" else FinishReason.ERROR
    assert served.finish_reasons["b"] is expected
    manager = served.manager
    assert isinstance(manager, KVContractOffloadingManager)
    stats = manager.inner.stats()
    assert stats.used == 6 and stats.reading == 0  # the blocks stay stored and complete_load unpinned them
    monkeypatch.undo()
    served.drop_gpu_prefix_cache()
    assert served.run("c", PROMPT_A).hit_tokens == 6 * BLOCK_TOKENS  # a later request loads them


@pytest.mark.skipif(VLLM_0_34, reason="vLLM 0.34 handles failed jobs (the tests above)")
def test_vllm_0_33_asserts_that_a_transfer_succeeded(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    served = engine(model, {"manager": {"capacity": 16}}, "fail")
    fail_copies(monkeypatch, Direction.STORE)
    with pytest.raises(AssertionError):
        served.run("a", PROMPT_A)


def tiering(tmp_path: Path) -> dict[str, object]:
    """Six blocks of host memory over a file tier of 32, the layout the tiny model's caches have."""
    return {
        "kv_layout": {"num_layers": 2, "num_kv_heads": 2, "head_dim": 16, "dtype": "float16"},
        "manager": {
            "kind": "tiering",
            "primary": {"capacity": 6, "policy": "arc"},
            "secondary": [{"kind": "file", "path": str(tmp_path / "tier"), "capacity": 32}],
        },
        "transfer": {"shared_memory_path": str(tmp_path / "host.shm")},
    }


@pytest.mark.parametrize("policy", POLICIES)
def test_a_tier_block_that_fails_its_checksum_is_recomputed_never_loaded(
    model: Path, tmp_path: Path, policy: Literal["recompute", "fail"]
) -> None:
    served = engine(model, tiering(tmp_path), policy)
    manager = served.manager
    assert isinstance(manager, KVContractOffloadingManager)
    assert isinstance(manager.inner, TieringOffloadingManager)
    served.run("a", PROMPT_A)
    served.run("c", PROMPT_C)  # evicts all of A from host memory; the file tier keeps it
    files = [path for path in (tmp_path / "tier").rglob("*") if path.is_file()]
    assert files
    for path in files:
        data = bytearray(path.read_bytes())
        data[-1] ^= 0xFF  # the fault: every block on disk now fails its checksum
        path.write_bytes(bytes(data))
    served.drop_gpu_prefix_cache()
    again = served.run("a2", PROMPT_A)
    assert again.loaded == [] and again.hit_tokens == 0  # vLLM never read a byte of a failed promotion
    assert served.finish_reasons["a2"] is FinishReason.LENGTH
    assert manager.inner.stats().tiers[0].checksum_failures >= 1
