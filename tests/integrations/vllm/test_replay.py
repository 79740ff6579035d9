"""The shipped serving trace through the adapter, called as vLLM's scheduler calls it, hits as kvcontract does natively."""

from __future__ import annotations

import pytest
from typing_extensions import override
from vllm.v1.kv_offload.base import LookupResult as VLLMLookupResult
from vllm.v1.kv_offload.base import OffloadKey as VLLMOffloadKey
from vllm.v1.kv_offload.base import ReqContext as VLLMReqContext
from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager as VLLMCPUOffloadingManager

from kvcontract.integrations.vllm import KVContractOffloadingManager
from kvcontract.integrations.vllm.replay import key_chains, replay_as_scheduler
from kvcontract.managers import CPUOffloadingManager
from kvcontract.sim import replay
from kvcontract.sim.trace import read_trace
from tests.sim.support import TRACE


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


@pytest.mark.parametrize("capacity", [2_000, 20_000])
def test_vllm_own_manager_under_the_same_calls_hits_as_the_adapter(capacity: int) -> None:
    """The bench's fourth side: vLLM's manager, its key positions recorded, serves the trace with the same hits."""
    chains = key_chains([request.hash_ids for request in read_trace(TRACE)])
    adapted = replay_as_scheduler(KVContractOffloadingManager(CPUOffloadingManager(capacity, "lru")), chains)
    theirs = replay_as_scheduler(VLLMCPUOffloadingManager(capacity, cache_policy="lru"), chains, block_tokens=16)
    assert (theirs.hit_blocks, theirs.evictions, theirs.failed_stores) == (
        adapted.hit_blocks,
        adapted.evictions,
        adapted.failed_stores,
    )


class _PositionsSeen(VLLMCPUOffloadingManager):
    """vLLM's manager, noting the position its context gives each key it is asked about."""

    def __init__(self) -> None:
        super().__init__(8, cache_policy="lru")
        self.positions: list[int | None] = []

    @override
    def lookup(self, key: VLLMOffloadKey, req_context: VLLMReqContext) -> VLLMLookupResult:
        self.positions.append(req_context.get_offload_key_position(key))
        return super().lookup(key, req_context)


@pytest.mark.parametrize(("block_tokens", "expected"), [(None, [None, None]), (16, [16, 32])])
def test_key_positions_are_recorded_only_when_asked(block_tokens: int | None, expected: list[int | None]) -> None:
    manager = _PositionsSeen()
    replay_as_scheduler(manager, key_chains([[1, 2]]), block_tokens=block_tokens)
    replay_as_scheduler(manager, key_chains([[1, 2]]), block_tokens=block_tokens)
    assert manager.positions[-2:] == expected
