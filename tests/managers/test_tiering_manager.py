"""The tiering manager's semantics, one by one, with tiers whose jobs finish on demand."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest
import torch
from typing_extensions import override

from kvcontract import (
    BlockIdsSpec,
    GPULoadStoreSpec,
    LookupResult,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
    TierJob,
    make_offload_key,
)
from kvcontract.managers import CPUOffloadingManager, TieringOffloadingManager
from tests.managers.support import ControlledTier

BLOCK_BYTES = 16
ctx = ReqContext("r")


@pytest.fixture(autouse=True)
def fresh_request() -> None:
    """Each test a request of its own in ``ctx``: the manager keeps per-request state on it."""
    global ctx
    ctx = ReqContext("r")


def key(i: int) -> OffloadKey:
    return make_offload_key(i.to_bytes(8, "big"))


class RecordingPrimary(CPUOffloadingManager):
    """A CPU manager that logs its shutdown, to check the order."""

    def __init__(self, capacity: int, log: list[str]) -> None:
        super().__init__(capacity)
        self.log = log

    @override
    def shutdown(self) -> None:
        self.log.append("primary shutdown")


def setup(
    capacity: int = 4, tiers: int = 1, room_wait: float = 2.0, cascade_share: float = 1.0
) -> tuple[TieringOffloadingManager, CPUOffloadingManager, list[ControlledTier], torch.Tensor]:
    """A tiering manager over ``capacity`` primary blocks and ``tiers`` controlled tiers; cascades may pin
    all of the primary unless told otherwise."""
    host = torch.zeros((capacity, BLOCK_BYTES), dtype=torch.uint8)
    primary = CPUOffloadingManager(capacity)
    controlled = [ControlledTier(host, f"t{i}") for i in range(tiers)]
    manager = TieringOffloadingManager(primary, controlled, room_wait=room_wait, cascade_share=cascade_share)
    return manager, primary, controlled, host


def store(manager: TieringOffloadingManager, host: torch.Tensor, keys: list[OffloadKey], success: bool = True) -> None:
    plan = manager.prepare_store(keys, ctx)
    assert plan is not None
    spec = plan.store_spec
    assert isinstance(spec, BlockIdsSpec)
    for k, block in zip(plan.keys_to_store, spec.block_ids):
        host[block] = int.from_bytes(k[:8], "big") % 251
    manager.complete_store(plan.keys_to_store, ctx, success)


def test_primary_hit_never_asks_the_tiers() -> None:
    manager, _, (tier,), host = setup()
    store(manager, host, [key(1)])
    tier.finish()
    tier.blocks.clear()
    assert manager.lookup(key(1), ctx) is LookupResult.HIT


def test_tier_hit_is_promoted_and_answers_retry_until_it_lands() -> None:
    manager, primary, (tier,), host = setup()
    tier.blocks[key(7)] = torch.full((BLOCK_BYTES,), 99, dtype=torch.uint8)
    assert manager.lookup(key(7), ctx) is LookupResult.RETRY
    assert primary.lookup(key(7), ctx) is LookupResult.HIT_PENDING
    assert manager.lookup(key(7), ctx) is LookupResult.RETRY
    assert tier.calls == ["load:1"]
    tier.finish()
    assert manager.lookup(key(7), ctx) is LookupResult.HIT
    spec = manager.prepare_load([key(7)], ctx)
    assert isinstance(spec, BlockIdsSpec)
    assert bool((host[spec.block_ids[0]] == 99).all())
    stats = manager.stats()
    assert stats.tiers[0].hits == 1 and stats.tiers[0].promoted == 1
    assert stats.tiers[0].bytes_read == BLOCK_BYTES


def test_tier_hit_waits_for_primary_room_while_a_load_holds_it() -> None:
    manager, _, (tier,), host = setup(capacity=1)
    store(manager, host, [key(1)])
    tier.finish()
    manager.prepare_load([key(1)], ctx)
    tier.blocks[key(2)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    assert manager.lookup(key(2), ctx) is LookupResult.RETRY
    assert tier.calls == ["store:1"]
    manager.complete_load([key(1)], ctx)
    assert manager.lookup(key(2), ctx) is LookupResult.RETRY
    manager.end_step()
    assert tier.calls == ["store:1", "load:1"]
    tier.finish()
    assert manager.lookup(key(2), ctx) is LookupResult.HIT


def test_tier_hit_is_a_miss_without_primary_room_past_the_wait() -> None:
    manager, _, (tier,), host = setup(capacity=1, room_wait=0.0)
    store(manager, host, [key(1)])
    manager.prepare_load([key(1)], ctx)
    tier.blocks[key(2)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    assert manager.lookup(key(2), ReqContext("waits")) is LookupResult.MISS


def test_tier_hit_is_a_miss_when_the_request_s_own_prefix_fills_the_primary() -> None:
    manager, _, (tier,), _ = setup(capacity=1)
    tier.blocks[key(2)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    tier.blocks[key(3)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    request = ReqContext("alone")
    assert manager.lookup(key(2), request) is LookupResult.RETRY
    manager.end_step()
    tier.finish()
    assert manager.lookup(key(2), request) is LookupResult.HIT
    assert manager.lookup(key(3), request) is LookupResult.MISS


def test_requests_looked_up_together_find_every_block_the_tier_holds() -> None:
    """A restarted engine looks up every waiting request at once; the primary holds one request's blocks.

    Regression: the second request's promotion found no room and answered MISS, so an engine
    computed half of what its file tier held.
    """
    manager, _, (tier,), _ = setup(capacity=2)
    first, second = ReqContext("a"), ReqContext("b")
    for i in (1, 2, 3, 4):
        tier.blocks[key(i)] = torch.full((BLOCK_BYTES,), i, dtype=torch.uint8)
    assert [manager.lookup(key(i), first) for i in (1, 2)] == [LookupResult.RETRY] * 2
    assert manager.lookup(key(3), second) is LookupResult.RETRY
    manager.end_step()
    tier.finish()
    assert [manager.lookup(key(i), first) for i in (1, 2)] == [LookupResult.HIT] * 2
    manager.prepare_load([key(1), key(2)], first)
    assert manager.lookup(key(3), second) is LookupResult.RETRY
    manager.complete_load([key(1), key(2)], first)
    assert [manager.lookup(key(i), second) for i in (3, 4)] == [LookupResult.RETRY] * 2
    manager.end_step()
    tier.finish()
    assert [manager.lookup(key(i), second) for i in (3, 4)] == [LookupResult.HIT] * 2


def test_a_block_wanted_twice_is_promoted_once() -> None:
    manager, _, (tier,), _ = setup()
    tier.blocks[key(3)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    first, second = ReqContext("a"), ReqContext("b")
    assert manager.lookup(key(3), first) is LookupResult.RETRY
    assert manager.lookup(key(3), second) is LookupResult.RETRY
    manager.take_events()
    assert manager.lookup(key(3), second) is LookupResult.RETRY
    assert tier.calls == ["load:1"]


def test_promotions_are_batched_per_tier_per_step() -> None:
    manager, _, tiers, _ = setup(tiers=2)
    tiers[0].blocks[key(1)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    tiers[0].blocks[key(2)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    tiers[1].blocks[key(3)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    answers = [manager.lookup(key(i), ctx) for i in (1, 2, 3)]
    assert answers == [LookupResult.RETRY] * 3
    assert tiers[0].calls == [] and tiers[1].calls == []
    manager.on_request_finished(ctx)
    assert tiers[0].calls == ["load:2"]
    assert tiers[1].calls == ["load:1"]


def test_completed_stores_cascade_to_every_tier_with_the_primary_blocks_pinned() -> None:
    manager, _, tiers, host = setup(capacity=2, tiers=2)
    store(manager, host, [key(1), key(2)])
    assert [t.calls for t in tiers] == [["store:2"], ["store:2"]]
    assert manager.prepare_store([key(3)], ctx) is None
    for tier in tiers:
        tier.finish()
    manager.take_events()
    assert all(set(t.blocks) == {key(1), key(2)} for t in tiers)
    assert bool((tiers[1].blocks[key(1)] == 1).all())
    assert manager.prepare_store([key(3)], ctx) is not None
    assert manager.stats().tiers[1].written == 2


def test_cascades_in_flight_pin_at_most_their_share_of_the_primary() -> None:
    """A tier that never finishes (a frozen server) holds half of host memory, not all of it: stores go on."""
    manager, _, (tier,), host = setup(capacity=8, cascade_share=0.5)
    store(manager, host, [key(i) for i in range(6)])
    assert tier.calls == ["store:4"]
    store(manager, host, [key(6), key(7)])
    assert tier.calls == ["store:4"], "no room left for cascades: nothing more is pinned"
    assert manager.stats().tiers[0].skipped_cascades == 4
    assert manager.prepare_store([key(8), key(9), key(10), key(11)], ctx) is not None, "four blocks stay free to evict"
    tier.finish()
    manager.take_events()
    store(manager, host, [key(12)])
    assert tier.calls[-1] == "store:1", "the room comes back when the cascades finish"


def test_a_block_cascading_to_two_tiers_costs_the_room_once() -> None:
    manager, _, tiers, host = setup(capacity=4, tiers=2, cascade_share=0.5)
    store(manager, host, [key(1), key(2)])
    assert [t.calls for t in tiers] == [["store:2"], ["store:2"]]
    assert manager.stats().tiers[1].skipped_cascades == 0


def test_cascade_share_must_be_a_fraction() -> None:
    with pytest.raises(ValueError, match="cascade_share"):
        setup(cascade_share=0.0)


def test_a_failed_store_cascades_nothing() -> None:
    manager, _, (tier,), host = setup()
    store(manager, host, [key(1)], success=False)
    assert tier.calls == []


def test_blocks_a_tier_already_holds_are_not_written_again() -> None:
    manager, _, (tier,), host = setup()
    tier.blocks[key(1)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    store(manager, host, [key(1), key(2)])
    assert tier.calls == ["store:1"]


def test_refused_cascade_unpins_the_primary_blocks() -> None:
    manager, _, (tier,), host = setup(capacity=1)
    tier.refuse_submits = True
    store(manager, host, [key(1)])
    assert manager.prepare_store([key(2)], ctx) is not None
    assert manager.stats().tiers[0].failed_jobs == 1


def test_failed_promotion_frees_the_reserved_block() -> None:
    manager, primary, (tier,), _ = setup()
    tier.blocks[key(5)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    assert manager.lookup(key(5), ctx) is LookupResult.RETRY
    manager.take_events()
    tier.fail_next = True
    tier.finish()
    del tier.blocks[key(5)]
    assert manager.lookup(key(5), ctx) is LookupResult.MISS
    assert primary.stats().used == 0


@pytest.mark.parametrize("fault", ["failed", "refused"])
def test_a_request_computes_a_key_whose_promotion_failed_rather_than_wait_on_the_tier_again(fault: str) -> None:
    """A tier slower than its ``job_deadline`` fails every promotion (or refuses them while its calls are late):
    the request that waited on one is told ``MISS`` then, and computes the key. Before, it started another
    promotion at each lookup, and vLLM's scheduler asked for ever (a slow Redis hung the engine)."""
    manager, primary, (tier,), _ = setup()
    tier.blocks[key(5)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    tier.refuse_submits = fault == "refused"
    assert manager.lookup(key(5), ctx) is LookupResult.RETRY
    manager.take_events()
    tier.fail_next = True
    tier.finish()
    assert [manager.lookup(key(5), ctx) for _ in range(3)] == [LookupResult.MISS] * 3
    assert tier.calls == ["load:1"], "one promotion for the request, not one per lookup"
    assert primary.stats().used == 0
    tier.refuse_submits = False
    assert manager.lookup(key(5), ReqContext("another")) is LookupResult.RETRY, "another request tries the tier again"


def test_a_request_promotes_again_a_block_evicted_before_it_loaded_it() -> None:
    """Under host pressure a promoted block may be evicted before its request comes back for it: no failure, so
    the request promotes it again (a restarted engine with little host memory then loads every block its tier
    holds, where computing them would lose what the tier kept)."""
    manager, primary, (tier,), host = setup(capacity=1)
    tier.blocks[key(5)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    waiting = ReqContext("waiting")
    assert manager.lookup(key(5), waiting) is LookupResult.RETRY
    manager.take_events()
    tier.finish()
    store(manager, host, [key(6)])
    tier.finish()  # key 6's cascade, which pins the one primary block until it lands
    assert primary.lookup(key(5), ctx) is LookupResult.MISS, "the one primary block went to key 6"
    assert manager.lookup(key(5), waiting) is LookupResult.RETRY
    manager.take_events()
    assert tier.calls.count("load:1") == 2, "promoted a second time"


def test_a_promotion_after_a_failed_one_in_the_same_step_lands_in_its_own_block() -> None:
    manager, primary, (tier,), host = setup(capacity=2)
    tier.blocks[key(1)] = torch.full((BLOCK_BYTES,), 11, dtype=torch.uint8)
    tier.blocks[key(0)] = torch.full((BLOCK_BYTES,), 10, dtype=torch.uint8)
    assert manager.lookup(key(1), ctx) is LookupResult.RETRY
    assert manager.lookup(key(1), ctx) is LookupResult.RETRY
    tier.fail_next = True
    tier.finish()
    del tier.blocks[key(1)]
    assert manager.lookup(key(1), ctx) is LookupResult.MISS
    assert manager.lookup(key(0), ctx) is LookupResult.RETRY
    assert manager.lookup(key(0), ctx) is LookupResult.RETRY
    tier.finish()
    assert manager.lookup(key(0), ctx) is LookupResult.HIT
    assert primary.stats().used == 1
    spec = manager.prepare_load([key(0)], ctx)
    assert isinstance(spec, BlockIdsSpec)
    assert torch.equal(host[spec.block_ids[0]], torch.full((BLOCK_BYTES,), 10, dtype=torch.uint8))


def test_touch_reaches_every_tier() -> None:
    manager, _, tiers, _ = setup(tiers=2)
    manager.touch([key(1), key(2)], ctx)
    assert [t.touched for t in tiers] == [[[key(1), key(2)]], [[key(1), key(2)]]]


def test_reset_cache_drains_in_flight_jobs_first() -> None:
    manager, primary, (tier,), host = setup()
    store(manager, host, [key(1)])
    timer = threading.Timer(0.05, tier.finish)
    started = time.perf_counter()
    timer.start()
    manager.reset_cache()
    assert time.perf_counter() - started >= 0.04
    assert tier.pending == []
    assert primary.lookup(key(1), ctx) is LookupResult.MISS
    assert key(1) in tier.blocks


def test_shutdown_stops_the_tiers_then_the_primary() -> None:
    log: list[str] = []
    host = torch.zeros((2, BLOCK_BYTES), dtype=torch.uint8)
    tiers = [ControlledTier(host, "a"), ControlledTier(host, "b")]
    manager = TieringOffloadingManager(RecordingPrimary(2, log), tiers)
    manager.shutdown()
    assert tiers[0].calls == ["shutdown"] and tiers[1].calls == ["shutdown"]
    assert log == ["primary shutdown"]


class GPUSpecPrimary(CPUOffloadingManager):
    """A primary that wrongly hands out GPU specs, which name no host blocks."""

    @override
    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        return PrepareStoreOutput(keys, GPULoadStoreSpec([1]), [])


def test_primary_must_hand_out_host_block_ids() -> None:
    host = torch.zeros((2, BLOCK_BYTES), dtype=torch.uint8)
    tier = ControlledTier(host)
    tier.blocks[key(1)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    manager = TieringOffloadingManager(GPUSpecPrimary(2), [tier])
    with pytest.raises(TypeError, match="needs a primary whose specs are BlockIdsSpec"):
        manager.lookup(key(1), ctx)


def test_cascades_do_not_count_as_lookups() -> None:
    manager, _, (tier,), host = setup()
    store(manager, host, [key(1), key(2)])
    assert tier.calls == ["store:2"]
    stats = manager.stats()
    assert (stats.hits, stats.misses) == (0, 0)


def test_a_promotion_in_flight_is_completed_only_by_the_tiering_manager() -> None:
    manager, primary, (tier,), host = setup()
    tier.blocks[key(7)] = torch.full((BLOCK_BYTES,), 99, dtype=torch.uint8)
    assert manager.lookup(key(7), ctx) is LookupResult.RETRY
    for success in (True, False):
        with pytest.raises(
            ValueError, match=r"block .* is being promoted from a secondary tier by 'kvcontract-tiering'"
        ):
            manager.complete_store([key(7)], ctx, success=success)
        with pytest.raises(ValueError, match=r"belongs to 'kvcontract-tiering', not 'r'"):
            primary.complete_store([key(7)], ctx, success=success)
    assert primary.lookup(key(7), ctx) is LookupResult.HIT_PENDING
    manager.on_request_finished(ctx)
    tier.finish()
    assert manager.lookup(key(7), ctx) is LookupResult.HIT
    spec = manager.prepare_load([key(7)], ctx)
    assert isinstance(spec, BlockIdsSpec)
    assert bool((host[spec.block_ids[0]] == 99).all())


def test_another_requests_store_and_a_bad_load_change_nothing_through_tiering() -> None:
    manager, primary, (tier,), host = setup()
    store(manager, host, [key(1)])
    manager.prepare_load([key(1)], ctx)
    other = ReqContext("other")
    assert manager.prepare_store([key(2)], other) is not None
    with pytest.raises(ValueError, match=r"the store of block .* belongs to 'other', not 'r'"):
        manager.complete_store([key(2)], ctx)
    with pytest.raises(ValueError, match=r"complete_load: block .* is not being loaded"):
        manager.complete_load([key(1), key(3)], ctx)
    with pytest.raises(ValueError, match=r"prepare_load: block .* is not offloaded"):
        manager.prepare_load([key(1), key(3)], ctx)
    assert tier.calls == ["store:1"]
    block = primary.policy.get(key(1))
    assert block is not None and block.ref_cnt == 2
    assert primary.lookup(key(2), ctx) is LookupResult.HIT_PENDING


class RaisingTier(ControlledTier):
    """A tier whose submits raise, as a tier with a bug would."""

    @override
    def submit_store(self, job: TierJob) -> bool:
        raise RuntimeError("injected tier bug")

    @override
    def submit_load(self, job: TierJob) -> bool:
        raise RuntimeError("injected tier bug")


def test_a_tier_submit_that_raises_leaves_no_block_pinned_or_reserved() -> None:
    host = torch.zeros((1, BLOCK_BYTES), dtype=torch.uint8)
    primary = CPUOffloadingManager(1)
    tier = RaisingTier(host)
    manager = TieringOffloadingManager(primary, [tier])
    plan = manager.prepare_store([key(1)], ctx)
    assert plan is not None
    with pytest.raises(RuntimeError, match="injected tier bug"):
        manager.complete_store([key(1)], ctx)
    block = primary.policy.get(key(1))
    assert block is not None and block.ref_cnt == 0
    tier.blocks[key(2)] = torch.zeros(BLOCK_BYTES, dtype=torch.uint8)
    assert manager.lookup(key(2), ctx) is LookupResult.RETRY
    with pytest.raises(RuntimeError, match="injected tier bug"):
        manager.on_request_finished(ctx)
    assert primary.lookup(key(2), ctx) is LookupResult.MISS
    assert primary.stats().used == 0


def test_a_caller_cannot_release_the_pin_a_cascade_holds() -> None:
    manager, primary, (tier,), host = setup(capacity=1)
    store(manager, host, [key(1)])
    with pytest.raises(
        ValueError, match=r"complete_load: block .* is not being loaded .* pinned by 0 loads of callers"
    ):
        manager.complete_load([key(1)], ctx)
    block = primary.policy.get(key(1))
    assert block is not None and block.ref_cnt == 1
    assert manager.prepare_store([key(2)], ctx) is None
    manager.prepare_load([key(1)], ctx)
    manager.complete_load([key(1)], ctx)
    assert block.ref_cnt == 1
    tier.finish()
    manager.on_request_finished(ctx)
    assert block.ref_cnt == 0 and key(1) in tier.blocks


def test_end_step_submits_the_steps_promotions_and_lands_finished_jobs() -> None:
    manager, primary, (tier,), host = setup()
    tier.blocks[key(5)] = torch.full((BLOCK_BYTES,), 5, dtype=torch.uint8)
    assert not manager.has_pending_work()
    assert manager.lookup(key(5), ctx) is LookupResult.RETRY
    assert manager.has_pending_work() and tier.calls == []
    manager.end_step()
    assert tier.calls == ["load:1"] and manager.has_pending_work()
    tier.finish()
    assert not manager.has_pending_work()
    assert primary.lookup(key(5), ctx) is LookupResult.HIT  # landed without another call on the manager
    store(manager, host, [key(1)])
    assert manager.has_pending_work()  # the cascade pins key(1) in the primary
    tier.finish()
    manager.end_step()
    assert not manager.has_pending_work()
