"""The capacity planner: hit-ratio curves of policies over capacities, bounded by the optimum.

LRU's curve comes from one pass of stack distances (exact, or for very long traces the mean of
a few independently salted SHARDS samples, whose spread gives the curve's standard error); every other policy is replayed through a CPU manager at each capacity of the grid,
the replays spread over processes; the offline optimum is computed at each capacity too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from kvcontract.enforce import configure
from kvcontract.managers import CPUOffloadingManager
from kvcontract.plan.optimum import optimal_hit_ratio
from kvcontract.plan.stack_distance import lru_hit_curve, shards_hit_curves
from kvcontract.sim.hit_bound import unbounded_hit_ratio
from kvcontract.sim.replay import replay

__all__ = ["CapacityPlan", "OPTIMUM", "plan_capacity", "plan_steps"]

OPTIMUM = "optimum"
"""The name the offline optimum's curve goes by in a plan."""

_SAMPLES = 4
"""Independently salted SHARDS samples averaged for a sampled LRU curve; their spread gives its error."""

_requests: Sequence[Sequence[int]] = ()


@dataclass(frozen=True, slots=True)
class CapacityPlan:
    """Hit ratios of each policy (and the optimum) at each capacity in blocks."""

    capacities: tuple[int, ...]
    curves: dict[str, tuple[float, ...]]
    """Policy name (and ``OPTIMUM``) to its hit ratio at each of ``capacities``."""
    requests: int
    blocks: int
    unique_blocks: int
    longest_request: int
    """Below this capacity a request cannot be stored whole, and LRU's one-pass curve is not exact."""
    unbounded_hit_ratio: float
    """The hit ratio with room for every block: no capacity and no policy reaches past it."""
    sample_rate: float | None = None
    """The SHARDS rate LRU's curve was sampled at, or ``None`` for the exact curve."""
    sampling_error: float | None = field(default=None)
    """Standard error of the sampled LRU curve (largest over the grid): of the mean of its samples."""

    def smallest_capacity(self, name: str, target: float) -> int | None:
        """The smallest capacity of the grid at which ``name`` reaches ``target``, or ``None``."""
        for capacity, ratio in zip(self.capacities, self.curves[name]):
            if ratio >= target:
                return capacity
        return None


def plan_capacity(
    requests: Sequence[Sequence[int]],
    capacities: Sequence[int],
    policies: Sequence[str] = ("lru",),
    *,
    sample_rate: float | None = None,
    processes: int | None = None,
    on_step: Callable[[int], None] | None = None,
) -> CapacityPlan:
    """Each of ``policies`` and the optimum over ``capacities`` (blocks) on ``requests`` (hash ids).

    ``on_step`` is called with the steps done so far, of :func:`plan_steps` in all.
    """
    if not capacities:
        raise ValueError("no capacities to plan for; give at least one")
    if not any(requests):
        raise ValueError("the trace has no blocks; give a trace with at least one request with hash ids")
    grid = tuple(sorted(set(capacities)))
    curves: dict[str, tuple[float, ...]] = {}
    error: float | None = None
    advance: Callable[[int], None] = on_step or _no_step
    done = 0
    if "lru" in policies:
        if sample_rate is None:
            curve = lru_hit_curve(requests)
            curves["lru"] = tuple(curve.hit_ratio(capacity) for capacity in grid)
        else:
            sampled = shards_hit_curves(requests, sample_rate, range(_SAMPLES))
            estimates = np.array([[curve.hit_ratio(capacity) for capacity in grid] for curve in sampled])
            curves["lru"] = tuple(float(ratio) for ratio in estimates.mean(axis=0))
            error = float(estimates.std(axis=0, ddof=1).max()) / _SAMPLES**0.5
        done += 1
        advance(done)
    replayed = [policy for policy in policies if policy != "lru"]
    tasks = [(policy, capacity) for policy in [*replayed, OPTIMUM] for capacity in grid]
    ratios: list[float] = []
    with ProcessPoolExecutor(processes or os.cpu_count(), initializer=_share, initargs=(requests,)) as pool:
        for ratio in pool.map(_hit_ratio, tasks):
            ratios.append(ratio)
            advance(done + len(ratios))
    for index, (policy, _) in enumerate(tasks[:: len(grid)]):
        curves[policy] = tuple(ratios[index * len(grid) : (index + 1) * len(grid)])
    blocks = sum(len(request) for request in requests)
    unique = len({hash_id for request in requests for hash_id in request})
    longest = max(len(request) for request in requests)
    ceiling = unbounded_hit_ratio(requests)
    return CapacityPlan(grid, curves, len(requests), blocks, unique, longest, ceiling, sample_rate, error)


def _no_step(done: int) -> None:
    """The step callback of a plan that nobody watches."""


def plan_steps(capacities: Sequence[int], policies: Sequence[str]) -> int:
    """The steps of :func:`plan_capacity`: LRU's one pass, and a replay per other policy (and the optimum) and capacity."""
    replayed = len([policy for policy in policies if policy != "lru"]) + 1
    return int("lru" in policies) + replayed * len(set(capacities))


def _share(requests: Sequence[Sequence[int]]) -> None:
    """Process initializer: the trace, sent once per worker process rather than once per task."""
    global _requests
    _requests = requests
    configure(checks=False)


def _hit_ratio(task: tuple[str, int]) -> float:
    policy, capacity = task
    if policy == OPTIMUM:
        return optimal_hit_ratio(_requests, capacity)
    return replay(CPUOffloadingManager(capacity, policy), _requests).hit_ratio
