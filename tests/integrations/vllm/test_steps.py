"""vLLM's per-step hooks reach the tiering manager, below any decorators.

vLLM calls ``on_schedule_end`` last in every scheduler step and keeps the engine stepping
while ``has_pending_work``: through them a promotion is submitted at the end of the step
that found it, and the engine does not go idle while a tier job still pins primary blocks.
The tier here finishes its jobs only when the test says so.
"""

from __future__ import annotations

import pytest
import torch
from vllm.v1.kv_offload.base import LookupResult, ReqContext, ScheduleEndContext, make_offload_key

from kvcontract.contracts import OffloadingManager, OffloadKey
from kvcontract.integrations.vllm import KVContractOffloadingManager
from kvcontract.managers import CPUOffloadingManager, FilterReusedOffloadingManager, TieringOffloadingManager
from tests.managers.support import ControlledTier

BLOCK_BYTES = 16
KEYS = [make_offload_key(number.to_bytes(8, "big"), 0) for number in range(4)]
STEP_END = ScheduleEndContext(new_req_ids=(), preempted_req_ids=())


def tiered(*, reuse_filter: bool) -> tuple[KVContractOffloadingManager, ControlledTier]:
    tier = ControlledTier(torch.zeros((4, BLOCK_BYTES), dtype=torch.uint8))
    inner: OffloadingManager = TieringOffloadingManager(CPUOffloadingManager(4), [tier])
    if reuse_filter:
        inner = FilterReusedOffloadingManager(inner)
    return KVContractOffloadingManager(inner), tier


@pytest.mark.parametrize("reuse_filter", [False, True])
def test_a_promotion_is_submitted_at_step_end_and_keeps_the_engine_stepping_until_it_lands(reuse_filter: bool) -> None:
    manager, tier = tiered(reuse_filter=reuse_filter)
    tier.blocks[OffloadKey(KEYS[0])] = torch.full((BLOCK_BYTES,), 7, dtype=torch.uint8)
    context = ReqContext("r")
    manager.on_new_request(context)
    assert manager.lookup(KEYS[0], context) is LookupResult.RETRY
    assert manager.has_pending_work() and tier.calls == []
    manager.on_schedule_end(STEP_END)
    assert tier.calls == ["load:1"]
    assert manager.has_pending_work()
    tier.finish()
    assert not manager.has_pending_work()  # landed by the engine's idle step, no request needed
    assert manager.lookup(KEYS[0], context) is LookupResult.HIT


def test_a_cascade_in_flight_keeps_the_engine_stepping() -> None:
    manager, tier = tiered(reuse_filter=False)
    context = ReqContext("r")
    manager.on_new_request(context)
    output = manager.prepare_store(KEYS[:2], context)
    assert output is not None
    manager.complete_store(output.keys_to_store, context)
    manager.on_request_finished(context)
    assert tier.calls == ["store:2"]
    assert manager.has_pending_work()
    tier.finish()
    manager.on_schedule_end(STEP_END)
    assert not manager.has_pending_work()


def test_a_manager_without_tiers_has_no_work_between_steps() -> None:
    manager = KVContractOffloadingManager(CPUOffloadingManager(4))
    manager.on_schedule_end(STEP_END)
    assert not manager.has_pending_work()
