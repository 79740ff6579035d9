"""The capacity planner: LRU's one-pass curve equals replays, the optimum bounds every policy."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcontract.managers import CPUOffloadingManager
from kvcontract.plan.grid import GridError, parse_capacity_grid
from kvcontract.plan.optimum import optimal_hit_ratio
from kvcontract.plan.planner import OPTIMUM, plan_capacity, plan_steps
from kvcontract.plan.stack_distance import lru_hit_curve, shards_hit_curve, shards_hit_curves
from kvcontract.policies import available_policies
from kvcontract.sim import read_trace, replay
from tests.sim.support import TRACE


@st.composite
def prefix_traces(draw: st.DrawFn) -> list[list[int]]:
    """Requests whose ids name prefix blocks: requests share leading blocks of a few chains."""
    chains = draw(st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=8, unique=True), min_size=1, max_size=6))
    offsets = [100 * number for number in range(len(chains))]
    picks = draw(st.lists(st.tuples(st.integers(0, len(chains) - 1), st.integers(1, 8)), min_size=1, max_size=40))
    return [[offsets[chain] + hash_id for hash_id in chains[chain][:length]] for chain, length in picks]


def _replayed(requests: Sequence[Sequence[int]], capacity: int, policy: str = "lru") -> float:
    return replay(CPUOffloadingManager(capacity, policy), requests).hit_ratio


@settings(max_examples=150, deadline=None)
@given(prefix_traces(), st.integers(0, 30))
def test_the_lru_curve_equals_a_replay_at_every_capacity_that_holds_the_longest_request(
    requests: list[list[int]], extra: int
) -> None:
    curve = lru_hit_curve(requests)
    capacity = curve.longest_request + extra
    assert curve.hit_ratio(capacity) == pytest.approx(_replayed(requests, capacity))


@settings(max_examples=60, deadline=None)
@given(prefix_traces(), st.integers(0, 20), st.sampled_from(available_policies()))
def test_no_policy_beats_the_optimum(requests: list[list[int]], extra: int, policy: str) -> None:
    capacity = max(len(request) for request in requests) + extra
    assert _replayed(requests, capacity, policy) <= optimal_hit_ratio(requests, capacity) + 1e-12


def test_the_optimum_keeps_the_block_used_soonest() -> None:
    # Capacity 1: after [1] and [2], keeping 1 (used next) beats LRU, which keeps 2.
    requests = [[1], [2], [1], [2]]
    assert optimal_hit_ratio(requests, 1) == pytest.approx(1 / 4)
    assert _replayed(requests, 1) == 0.0


def test_a_full_sample_reproduces_the_exact_curve() -> None:
    requests = [[1, 2, 3], [1, 2], [4], [1, 2, 3, 5], [4, 6]]
    exact, sampled = lru_hit_curve(requests), shards_hit_curve(requests, 1.0)
    assert [sampled.hit_ratio(c) for c in range(8)] == [exact.hit_ratio(c) for c in range(8)]


@settings(max_examples=80, deadline=None)
@given(prefix_traces(), st.integers(0, 3))
def test_a_full_sample_reproduces_the_exact_curve_on_any_prefix_trace(requests: list[list[int]], seed: int) -> None:
    exact, sampled = lru_hit_curve(requests), shards_hit_curve(requests, 1.0, seed=seed)
    capacities = range(sum(len(request) for request in requests) + 2)
    assert [sampled.hit_ratio(c) for c in capacities] == pytest.approx([exact.hit_ratio(c) for c in capacities])


def test_a_block_reused_often_enough_is_always_in_the_sample() -> None:
    # Block 0 heads all 300 requests: at 1 % it is kept with certainty and counts once, whatever the salt.
    requests = [[0, 1 + number] for number in range(300)]
    curves = shards_hit_curves(requests, 0.01, range(5))
    assert [curve.hit_ratio(1_000) for curve in curves] == pytest.approx([299 / 600] * 5)


@pytest.mark.parametrize("rate", [0.0, -0.1, 1.5])
def test_a_sampling_rate_outside_zero_to_one_is_refused(rate: float) -> None:
    with pytest.raises(ValueError, match="sampling rate"):
        shards_hit_curve([[1]], rate)


def test_a_plan_names_the_smallest_capacity_that_reaches_a_target() -> None:
    requests = [[1, 2], [3, 4], [1, 2], [3, 4], [1, 2]]
    plan = plan_capacity(requests, [2, 4], ["lru", "arc"], processes=1)
    assert plan.curves["lru"] == pytest.approx((0.0, 0.6))
    assert plan.smallest_capacity("lru", 0.5) == 4
    assert plan.smallest_capacity(OPTIMUM, 0.9) is None
    assert plan.unique_blocks == 4 and plan.blocks == 10 and plan.longest_request == 2
    assert plan.unbounded_hit_ratio == pytest.approx(0.6)


def test_a_trace_without_blocks_cannot_be_planned() -> None:
    with pytest.raises(ValueError, match="no blocks"):
        plan_capacity([[], []], [4])


def test_on_the_shared_trace_lru_matches_replays_and_the_optimum_matches_the_readme() -> None:
    requests = [request.hash_ids for request in read_trace(TRACE)]
    curve = lru_hit_curve(requests)
    two_percent = int(0.02 * 182_790)
    assert curve.hit_ratio(two_percent) == pytest.approx(_replayed(requests, two_percent))
    assert optimal_hit_ratio(requests, int(0.05 * 182_790)) == pytest.approx(0.366, abs=5e-4)


def test_on_the_shared_trace_a_one_percent_sampled_curve_is_within_a_hundredth_of_the_exact_one() -> None:
    requests = [request.hash_ids for request in read_trace(TRACE)]
    grid = parse_capacity_grid("1%..50%", unique_blocks=182_790, block_bytes=None, points=5)
    exact = lru_hit_curve(requests)
    plan = plan_capacity(requests, grid, ["lru"], sample_rate=0.01, processes=1)
    errors = [abs(ratio - exact.hit_ratio(capacity)) for capacity, ratio in zip(grid, plan.curves["lru"])]
    assert max(errors) < 0.01
    assert plan.sampling_error is not None and max(errors) < 4 * plan.sampling_error


def test_a_percentage_range_spans_the_unique_blocks_on_a_log_scale() -> None:
    grid = parse_capacity_grid("1%..50%", unique_blocks=10_000, block_bytes=None, points=5)
    assert grid[0] == 100 and grid[-1] == 5_000 and len(grid) == 5
    assert all(later / earlier == pytest.approx(grid[1] / grid[0], rel=0.02) for earlier, later in zip(grid, grid[1:]))


def test_sizes_become_blocks_and_lists_name_each_capacity() -> None:
    assert parse_capacity_grid("1GiB,2GiB", unique_blocks=10, block_bytes=2**20) == [1024, 2048]
    assert parse_capacity_grid("64, 5%", unique_blocks=1000, block_bytes=None) == [50, 64]


@pytest.mark.parametrize(
    ("text", "block_bytes", "message"),
    [
        ("8GiB", None, "give --block-bytes"),
        ("lots", None, "not understood"),
        ("0", None, "at least one block"),
        ("150%", None, r"in \(0%, 100%\]"),
        ("50%..1%", None, "ends below its start"),
        ("1KiB", 2**20, "holds no block"),
        ("64MiB!!", 2**20, "not understood"),
        ("50%%", None, "not understood"),
        ("2GiBs", 2**20, "not understood"),
    ],
)
def test_a_bad_capacity_names_what_to_write(text: str, block_bytes: int | None, message: str) -> None:
    with pytest.raises(GridError, match=message):
        parse_capacity_grid(text, unique_blocks=1000, block_bytes=block_bytes)


@pytest.mark.parametrize("policies", [("lru",), ("lru", "arc"), ("arc", "sieve")])
def test_the_plan_reports_each_step_it_takes(policies: tuple[str, ...]) -> None:
    requests = [[1, 2, 3], [1, 2], [4, 5], [1, 2, 3, 6], [4, 5, 7]]
    steps: list[int] = []
    plan_capacity(requests, [2, 3, 5], policies, processes=1, on_step=steps.append)
    assert steps == list(range(1, plan_steps([2, 3, 5], policies) + 1))
