"""Hit ratios split by tier (host memory, then file, Redis or Mooncake tiers), from one pass of stack distances.

The tiering manager writes every block stored in host memory through to each tier and
touches a request's blocks in every tier, so each LRU tier of ``c`` blocks holds the ``c``
most recent blocks of the same recency stack as host memory: the hierarchy is inclusive.
A block is then a prefix hit when its request's prefix up to it lies within the largest
level, and it is served by the first level in lookup order (host first) that holds it when
its request comes. So one pass of stack depths answers every host capacity and every tier
size at once; the file, Redis and Mooncake tiers differ in where the bytes go, not in what they
hold. A Redis or Mooncake tier is modelled as LRU of its size: Redis's ``allkeys-lru`` and
Mooncake's eviction above its high watermark approximate it, and the plan says what an LRU of
that size would serve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kvcontract.plan.stack_distance import lru_stack_depths

__all__ = ["HOST", "TIER_KINDS", "TierPlan", "plan_tiers"]

HOST = "host"
"""The first level: host memory, whose capacity the plan's grid spans."""

TIER_KINDS = ("file", "redis", "mooncake")
"""The tiers a plan can put below host memory, in any order, each at most once."""


@dataclass(frozen=True, slots=True)
class TierPlan:
    """At each host capacity of the grid: the hit ratio each level serves, tiers at their fixed sizes."""

    capacities: tuple[int, ...]
    """Host capacities in blocks, ascending."""
    tier_capacities: dict[str, int]
    """Each tier below host memory and its capacity in blocks, in lookup order."""
    hit_ratios: dict[str, tuple[float, ...]]
    """``HOST`` and each tier to the fraction of requested blocks it serves at each host capacity."""
    blocks: int
    longest_request: int
    """Below this host capacity a request cannot be stored whole, and the split is not exact."""

    @property
    def levels(self) -> tuple[str, ...]:
        """``HOST``, then the tiers in lookup order."""
        return (HOST, *self.tier_capacities)

    def total(self, index: int) -> float:
        """The hit ratio of all levels together at the grid's ``index``-th host capacity."""
        return sum(ratios[index] for ratios in self.hit_ratios.values())


def plan_tiers(
    requests: Sequence[Sequence[int]], capacities: Sequence[int], tier_capacities: Mapping[str, int]
) -> TierPlan:
    """The hit ratio each level serves at each host capacity in ``capacities`` (blocks), tiers in lookup order."""
    if not capacities:
        raise ValueError("no host capacities to plan for; give at least one")
    unknown = sorted(set(tier_capacities) - set(TIER_KINDS))
    if unknown or not tier_capacities:
        raise ValueError(f"tiers {unknown or 'none'}: give one or more of {', '.join(TIER_KINDS)} below host memory")
    small = [f"{name}={size}" for name, size in tier_capacities.items() if size < 1]
    if small:
        raise ValueError(f"tier capacities {', '.join(small)}: give each tier at least one block")
    if not any(requests):
        raise ValueError("the trace has no blocks; give a trace with at least one request with hash ids")
    depths = lru_stack_depths(requests)
    grid = tuple(sorted(set(capacities)))
    blocks = len(depths.own)
    ratios: dict[str, list[float]] = {level: [] for level in (HOST, *tier_capacities)}
    for host in grid:
        largest = max(host, *tier_capacities.values())
        pending = depths.prefix <= largest
        for level, size in ((HOST, host), *tier_capacities.items()):
            served = pending & (depths.own <= size)
            ratios[level].append(int(np.count_nonzero(served)) / blocks)
            pending &= ~served
    longest = int(depths.lengths.max())
    return TierPlan(
        grid, dict(tier_capacities), {level: tuple(values) for level, values in ratios.items()}, blocks, longest
    )
