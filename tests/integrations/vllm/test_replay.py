"""The shared serving trace through the adapter, called as vLLM's scheduler calls it, hits as kvcontract does natively."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvcontract.integrations.vllm import KVContractOffloadingManager
from kvcontract.integrations.vllm.replay import key_chains, replay_as_scheduler
from kvcontract.managers import CPUOffloadingManager
from kvcontract.sim import replay
from kvcontract.sim.trace import read_trace

TRACE = Path("/work/shared/traces/conversation_trace.jsonl")

pytestmark = pytest.mark.skipif(not TRACE.exists(), reason=f"the shared trace {TRACE} is not on this machine")


@pytest.mark.parametrize("capacity", [2_000, 20_000])
def test_adapter_hit_ratio_equals_the_native_manager(capacity: int) -> None:
    requests = read_trace(TRACE)
    native = replay(CPUOffloadingManager(capacity, "lru"), requests)
    chains = key_chains([request.hash_ids for request in requests])
    adapted = replay_as_scheduler(KVContractOffloadingManager(CPUOffloadingManager(capacity, "lru")), chains)
    assert (adapted.blocks, adapted.hit_blocks, adapted.evictions, adapted.failed_stores) == (
        native.blocks,
        native.hit_blocks,
        native.evictions,
        native.failed_stores,
    )
    assert adapted.hit_ratio == native.hit_ratio > 0
