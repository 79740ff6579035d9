"""vLLM's scheduler and its OffloadingConnector drive kvcontract's managers; a real worker moves the bytes.

Each test runs requests through vLLM's ``Scheduler`` (``OffloadingConnectorScheduler``
inside) and a worker-side ``OffloadingConnector`` over CPU KV caches: hits, loads, stores,
evictions, refused stores, finished requests, tier promotions (``RETRY``). vLLM's scheduler
drains events and stats itself each step; their conversion is pinned in test_spec.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
import torch
from vllm.distributed.kv_transfer.kv_connector.v1.offloading.metrics import OffloadingConnectorStats

from kvcontract.contracts import OffloadKey, PrepareStoreOutput, ReqContext
from kvcontract.integrations.vllm import (
    KVContractOffloadingManager,
    KVContractOffloadingSpec,
    RequestTokens,
    request_tokens,
)
from kvcontract.integrations.vllm.releases import PUBLISHES_CONFIG_INFO
from kvcontract.managers import CPUOffloadingManager, TieringOffloadingManager
from tests.integrations.vllm.support import BLOCK_TOKENS, SPEC_PATH, VLLM_0_34, Engine, model_dir, vllm_config

GPU_BLOCKS = 64
PROMPT_A = list(range(100))
"""Six full blocks of 16 tokens and a partial one (never offloaded)."""
PROMPT_C = list(range(1000, 1100))


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_dir(tmp_path_factory.mktemp("tiny-llama"))


def engine(model: Path, kvcontract: Mapping[str, object], *, events: bool = False) -> Engine:
    config = vllm_config(model, {**SPEC_PATH, "kvcontract": kvcontract}, num_blocks=GPU_BLOCKS, events=events)
    return Engine(config, GPU_BLOCKS, with_worker=True)


def block_bytes(engine: Engine, blocks: list[int]) -> list[torch.Tensor]:
    return [cache[blocks].clone() for cache in engine.caches.values()]


def test_stored_blocks_load_back_byte_exact(model: Path) -> None:
    served = engine(model, {"manager": {"capacity": 16}})
    first = served.run("a", PROMPT_A)
    assert first.hit_tokens == 0 and len(first.stored) == 6
    stored = block_bytes(served, first.stored)
    served.drop_gpu_prefix_cache()
    for cache in served.caches.values():
        cache.zero_()
    again = served.run("b", PROMPT_A)
    assert again.hit_tokens == 6 * BLOCK_TOKENS
    assert again.stored == []
    for before, after in zip(stored, block_bytes(served, again.loaded)):
        assert torch.equal(before, after)


def test_eviction_follows_recency_committed_when_requests_finish(model: Path) -> None:
    served = engine(model, {"manager": {"capacity": 8, "policy": "lru"}})
    served.run("a", PROMPT_A)
    c = served.run("c", PROMPT_C)
    assert len(c.stored) == 6
    served.drop_gpu_prefix_cache()
    # A's request touched its blocks at its end, first block most recent: C evicted A's last four.
    assert served.run("a2", PROMPT_A).hit_tokens == 2 * BLOCK_TOKENS


def test_a_store_without_room_is_refused_and_counted(model: Path) -> None:
    served = engine(model, {"manager": {"capacity": 4}})
    refused = served.run("a", PROMPT_A)
    assert refused.stored == []
    manager = served.manager
    assert isinstance(manager, KVContractOffloadingManager)
    failed = manager.inner.stats().failed_stores
    assert failed >= 6 and failed % 6 == 0  # vLLM offers the six blocks again on a later step
    served.drop_gpu_prefix_cache()
    assert served.run("b", PROMPT_A).hit_tokens == 0


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


def test_a_tier_promotion_answers_retry_then_loads_byte_exact(model: Path, tmp_path: Path) -> None:
    served = engine(model, tiering(tmp_path))
    manager = served.manager
    assert isinstance(manager, KVContractOffloadingManager)
    assert isinstance(manager.inner, TieringOffloadingManager)
    first = served.run("a", PROMPT_A)
    stored = block_bytes(served, first.stored)
    served.run("c", PROMPT_C)  # evicts all of A from host memory; the file tier keeps it
    served.drop_gpu_prefix_cache()
    for cache in served.caches.values():
        cache.zero_()
    again = served.run("a2", PROMPT_A)
    assert again.hit_tokens == 6 * BLOCK_TOKENS
    stats = manager.inner.stats()
    assert stats.tiers[0].promoted == 6  # lookups answered RETRY until the promotion landed
    for before, after in zip(stored, block_bytes(served, again.loaded)):
        assert torch.equal(before, after)


@pytest.mark.skipif(not PUBLISHES_CONFIG_INFO, reason="vLLM 0.32 has no config-info metric")
def test_the_config_info_metric_carries_the_labels_the_spec_declares(model: Path, tmp_path: Path) -> None:
    served = engine(model, tiering(tmp_path))
    stats = served.connector.get_kv_connector_stats()  # the first payload carries vllm:kv_offload_config_info
    assert isinstance(stats, OffloadingConnectorStats)
    (series,) = stats.data["info"]
    assert tuple(series) == KVContractOffloadingSpec.config_info_keys({})  # vLLM drops or blanks any other name
    assert series == {
        "cpu_num_chunks": 6,
        "cpu_blocks_per_chunk": 1,
        "cpu_kv_cache_size_bytes": 6 * 2 * 2 * 2 * 16 * BLOCK_TOKENS * 2,  # layers, K and V, heads, dim, tokens, fp16
        "cpu_kv_cache_size_tokens": series["cpu_kv_cache_size_tokens"],
        "kvcontract_manager": "tiering",
        "kvcontract_policy": "arc",
        "kvcontract_admission": "none",
        "kvcontract_tiers": "file",
    }


def test_a_kvcontract_manager_reads_the_requests_token_counts(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[RequestTokens | None] = []
    prepare_store = CPUOffloadingManager.prepare_store

    def recording(
        self: CPUOffloadingManager, keys: Sequence[OffloadKey], req_context: ReqContext
    ) -> PrepareStoreOutput | None:
        seen.append(request_tokens(req_context))
        return prepare_store(self, keys, req_context)

    monkeypatch.setattr(CPUOffloadingManager, "prepare_store", recording)
    engine(model, {"manager": {"capacity": 16}}).run("a", PROMPT_A)
    assert seen
    if not VLLM_0_34:
        assert set(seen) == {None}  # vLLM 0.33's contexts count no tokens
        return
    # The scheduler offers the prompt's blocks while it schedules their prefill: its counts then.
    assert seen == [RequestTokens(num_computed_tokens=0, num_in_flight_tokens=0, num_prompt_tokens=100, num_tokens=100)]
    assert request_tokens(ReqContext("not-from-the-adapter")) is None
