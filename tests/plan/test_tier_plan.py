"""The tier split of a plan: one pass of stack depths against a replay through the real tiering manager."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcontract import LookupResult, ReqContext
from kvcontract.engine_driver.keys import block_key
from kvcontract.managers import CPUOffloadingManager, TieringOffloadingManager
from kvcontract.plan.tier_plan import HOST, plan_tiers
from kvcontract.testing import example_identity
from kvcontract.tiers import FileTier

_BLOCK_BYTES = 16


def _settle(manager: TieringOffloadingManager) -> None:
    """Step until every tier job has landed, as an engine keeps stepping while work is pending."""
    manager.end_step()
    while manager.has_pending_work():
        time.sleep(0.0005)
        manager.end_step()


def _replayed_split(requests: Sequence[Sequence[int]], host: int, tier: int, root: Path) -> tuple[float, float]:
    """Host and file-tier hit ratios of a replay: a request whose lookup says RETRY looks up again next step."""
    file_tier = FileTier(
        root,
        tier,
        torch.zeros(host, _BLOCK_BYTES, dtype=torch.uint8),
        identity=example_identity(_BLOCK_BYTES),
        io_threads=1,
    )
    manager = TieringOffloadingManager(CPUOffloadingManager(host, "lru"), [file_tier])
    blocks = host_hits = tier_hits = 0
    try:
        for number, request in enumerate(requests):
            promoted_before = manager.stats().tiers[0].promoted
            keys = [block_key(hash_id) for hash_id in request]
            context = ReqContext(str(number))
            while True:
                found = 0
                answer = LookupResult.MISS
                for key in keys:
                    answer = manager.lookup(key, context)
                    if answer is not LookupResult.HIT:
                        break
                    found += 1
                if answer is not LookupResult.RETRY:
                    break
                _settle(manager)
            blocks += len(keys)
            if found:
                manager.prepare_load(keys[:found], context)
                manager.complete_load(keys[:found], context)
            output = manager.prepare_store(keys, context) if found < len(keys) else None
            manager.touch(keys, context)
            if output is not None:
                manager.complete_store(output.keys_to_store, context)
            manager.on_request_finished(context)
            _settle(manager)
            promoted = manager.stats().tiers[0].promoted - promoted_before
            host_hits += found - promoted
            tier_hits += promoted
    finally:
        manager.shutdown()
    return host_hits / blocks, tier_hits / blocks


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 12), min_size=1, max_size=40), st.integers(1, 5), st.integers(0, 6))
def test_the_split_by_tier_equals_a_replay_through_the_tiering_manager_with_a_file_tier(
    tmp_path_factory: pytest.TempPathFactory, ids: list[int], host: int, extra_tier: int
) -> None:
    # One block per request: the order in which a tier takes a request's new blocks plays no part (see the docs).
    requests = [[hash_id] for hash_id in ids]
    plan = plan_tiers(requests, [host], {"file": host + extra_tier})
    replayed = _replayed_split(requests, host, host + extra_tier, tmp_path_factory.mktemp("tier"))
    assert (plan.hit_ratios[HOST][0], plan.hit_ratios["file"][0]) == pytest.approx(replayed)


def test_prefix_chains_split_between_host_and_a_larger_file_tier_as_a_replay_does(tmp_path: Path) -> None:
    # Host of 3 blocks, file tier of 6: 1,2,3 and then 4,5 come back from the file tier; at the end only block 1
    # is among the 6 most recent (behind 7,8,9,4,5), so the last request hits one block.
    requests = [[1, 2, 3], [4, 5, 6], [1, 2, 3], [4, 5], [7, 8, 9], [1, 2, 3]]
    plan = plan_tiers(requests, [3], {"file": 6})
    assert _replayed_split(requests, 3, 6, tmp_path) == pytest.approx(
        (plan.hit_ratios[HOST][0], plan.hit_ratios["file"][0])
    )
    assert plan.hit_ratios["file"][0] > 0 and plan.total(0) == pytest.approx(6 / 17)


def test_a_tier_no_larger_than_host_memory_serves_nothing_and_a_second_tier_serves_what_the_first_lacks() -> None:
    requests = [[1, 2], [3, 4], [5, 6], [1, 2], [3, 4]]
    assert plan_tiers(requests, [4], {"file": 4}).hit_ratios["file"] == (0.0,)
    plan = plan_tiers(requests, [2], {"file": 4, "redis": 6})
    assert plan.levels == (HOST, "file", "redis")
    assert plan.hit_ratios["file"] == (0.0,) and plan.hit_ratios["redis"] == pytest.approx((0.4,))


@pytest.mark.parametrize(
    ("tiers", "message"),
    [({}, "give one or more of file, redis"), ({"tape": 4}, "tape"), ({"file": 0}, "at least one block")],
)
def test_bad_tiers_name_what_to_give(tiers: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_tiers([[1]], [1], tiers)
