"""LRU's whole hit-ratio curve from one pass over a trace (Mattson's stack distances), and SHARDS.

Under the replay's semantics (look up the readable prefix, store the whole request, touch it
with the first key most recent) an LRU cache of ``c`` blocks holds exactly the ``c`` most
recent blocks of one recency stack, whatever ``c`` is, as long as every request fits. So one
pass that finds each block's depth in that stack answers every capacity at once: a block is a
prefix hit at capacity ``c`` when it and every block before it in its request sit at depth
``c`` or less. A depth is a count of distinct blocks between two accesses, which all accesses
get at once from a merge-sort tree (one stable sort and one binary search per level), so the
pass costs a few dozen numpy calls in all rather than a Python loop per request or block.

SHARDS (Waldspurger et al., FAST'15) keeps a hashed sample of the blocks and lets each stand
for the blocks it represents: a curve from a fraction of the work, with an error that
``tools/bench_plan.py`` measures against the exact curve.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "NEVER",
    "HitCurve",
    "StackDepths",
    "lru_hit_curve",
    "lru_stack_depths",
    "shards_hit_curve",
    "shards_hit_curves",
]

_MIX = np.uint64(0x9E3779B97F4A7C15)
NEVER = np.iinfo(np.int64).max
"""The depth of an access that no capacity holds (a block's first access)."""
_SLACK = 1e-6


@dataclass(frozen=True, slots=True)
class HitCurve:
    """Prefix hits of an LRU cache at every capacity: ``hits_at[c]`` blocks hit with ``c`` blocks."""

    hits_at: npt.NDArray[np.float64]
    """Cumulative hits by capacity in blocks; capacities past the end hit as many as the last entry."""
    blocks: int
    """Blocks requested over the whole trace."""
    longest_request: int
    """Blocks of the longest request: below that capacity the curve is an upper bound, not exact."""

    def hit_ratio(self, capacity: int) -> float:
        """Fraction of requested blocks that were prefix hits with ``capacity`` blocks."""
        if capacity < 0:
            raise ValueError(f"capacity {capacity} is negative; give a number of blocks >= 0")
        if not self.blocks:
            return 0.0
        index = min(capacity, len(self.hits_at) - 1)
        return float(self.hits_at[index]) / self.blocks


@dataclass(frozen=True, slots=True)
class StackDepths:
    """Each access's place in LRU's recency stack, in request order, for capacities of every size at once."""

    own: npt.NDArray[np.int64]
    """The smallest capacity that holds the access's block when its request comes (``NEVER``: a first access)."""
    prefix: npt.NDArray[np.int64]
    """The smallest capacity at which the access is a prefix hit: the running maximum of ``own`` in its request."""
    lengths: npt.NDArray[np.int64]
    """Blocks of each request."""


def lru_stack_depths(requests: Sequence[Sequence[int]]) -> StackDepths:
    """The exact LRU stack depths of every access of ``requests`` (each a request's block hash ids)."""
    ids, lengths = _flatten(requests)
    own = _depths(ids, lengths, np.ones(int(ids.max()) + 1 if len(ids) else 0))
    return StackDepths(own, _running_max(own, lengths), lengths)


def lru_hit_curve(requests: Sequence[Sequence[int]]) -> HitCurve:
    """LRU's exact prefix-hit curve over ``requests`` (each a request's block hash ids, in order)."""
    depths = lru_stack_depths(requests)
    finite = depths.prefix[depths.prefix < NEVER]
    longest = int(depths.lengths.max()) if len(depths.lengths) else 0
    return HitCurve(np.cumsum(np.bincount(finite, minlength=1).astype(np.float64)), len(depths.own), longest)


def shards_hit_curves(requests: Sequence[Sequence[int]], rate: float, seeds: Sequence[int]) -> list[HitCurve]:
    """LRU's prefix-hit curve estimated from a spatial sample of the blocks (SHARDS with known reuses).

    A block referenced once can never hit; a block reused ``r`` times can hit ``r`` times, and a
    few blocks shared by most requests (a system prompt) would swing a uniform sample's curve. The
    pass counts every block's references anyway, so a block is kept with probability
    ``rate * max(1, r)`` (at most 1) by its salted hash, and stands for ``1 / p`` blocks both in
    the depths (weighted counts of distinct blocks since the last access) and in the hits. The
    hits are then corrected by regression on the reuses, whose total is known, with the
    coefficient fitted per capacity from the sample (SHARDS-adj corrects with a fixed 1 instead).
    Each of ``seeds`` salts the hash for an independent sample; the trace is read once for all.
    """
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"sampling rate {rate} is outside (0, 1]; give for example 0.01 for 1 %")
    ids, lengths = _flatten(requests)
    reuses = np.bincount(ids).astype(np.float64) - 1.0 if len(ids) else np.zeros(0)
    chance = np.minimum(rate * np.maximum(reuses, 1.0), 1.0)
    request_of = np.repeat(np.arange(len(lengths)), lengths)
    longest = int(lengths.max()) if len(lengths) else 0
    return [
        HitCurve(_sampled_hits(ids, lengths, request_of, reuses, chance, seed), len(ids), longest) for seed in seeds
    ]


def shards_hit_curve(requests: Sequence[Sequence[int]], rate: float, *, seed: int = 0) -> HitCurve:
    """LRU's prefix-hit curve estimated from one sample of the blocks at ``rate`` (see ``shards_hit_curves``)."""
    return shards_hit_curves(requests, rate, [seed])[0]


def _sampled_hits(
    ids: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
    request_of: npt.NDArray[np.int64],
    reuses: npt.NDArray[np.float64],
    chance: npt.NDArray[np.float64],
    seed: int,
) -> npt.NDArray[np.float64]:
    """Estimated cumulative hits by capacity from the blocks that the salted hash keeps."""
    kept_blocks = _uniform(len(reuses), seed) < chance
    keep = kept_blocks[ids]
    kept = ids[keep]
    weight = 1.0 / chance
    depths = _prefix_depths(kept, np.bincount(request_of[keep], minlength=len(lengths)), weight)
    hit = depths < NEVER
    size = int(depths[hit].max()) + 1 if hit.any() else 1
    hits = np.cumsum(np.bincount(depths[hit], weights=weight[kept[hit]], minlength=size))
    products = np.cumsum(np.bincount(depths[hit], weights=(weight * reuses)[kept[hit]], minlength=size))
    squares = float((weight * reuses**2)[kept_blocks].sum())
    slope = np.minimum(np.maximum(products / squares, 0.0), 1.0) if squares else np.zeros(size)
    missing = float(reuses.sum() - (weight * reuses)[kept_blocks].sum())
    estimate: npt.NDArray[np.float64] = np.minimum(np.maximum(hits + slope * missing, 0.0), float(len(ids)))
    return estimate


def _uniform(blocks: int, seed: int) -> npt.NDArray[np.float64]:
    """A salted hash of each block number, spread evenly over [0, 1)."""
    numbers: npt.NDArray[np.uint64] = np.arange(blocks, dtype=np.uint64)
    offset = np.uint64(seed * int(_MIX) % 2**64)
    mixed: npt.NDArray[np.uint64] = np.multiply(numbers + offset, _MIX)
    spread: npt.NDArray[np.float64] = np.right_shift(mixed, np.uint64(11)).astype(np.float64) / 2.0**53
    return spread


def _flatten(requests: Sequence[Sequence[int]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Dense block numbers of every access in request order, and each request's length."""
    lengths = np.fromiter((len(request) for request in requests), dtype=np.int64, count=len(requests))
    numbers: dict[int, int] = {}
    ids = np.fromiter(
        (numbers.setdefault(hash_id, len(numbers)) for request in requests for hash_id in request),
        dtype=np.int64,
        count=int(lengths.sum()),
    )
    return ids, lengths


def _depths(
    ids: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], block_weight: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """For each access in request order, its block's depth in the LRU stack (``NEVER``: first access).

    An access's depth is its block's weight plus the weight of the distinct blocks accessed
    between its block's previous access and the start of its request, rounded up to whole
    blocks (with weights of 1, the exact stack distance). A repeat of a block inside one request
    counts as a miss.
    """
    accesses = len(ids)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    # Time runs backwards inside a request: its first key is the most recent.
    start_of = np.repeat(starts, lengths)
    time_of = start_of + np.repeat(ends, lengths) - 1 - np.arange(accesses)
    blocks = np.empty(accesses, dtype=np.int64)
    blocks[time_of] = ids
    request_start = np.empty(accesses, dtype=np.int64)
    request_start[time_of] = start_of
    weights = block_weight[blocks]
    by_block = np.argsort(blocks, kind="stable")
    previous = np.zeros(accesses, dtype=np.int64) - 1
    same = blocks[by_block[1:]] == blocks[by_block[:-1]]
    previous[by_block[1:][same]] = by_block[:-1][same]
    total = np.concatenate(([0.0], np.cumsum(weights)))
    warm = np.flatnonzero((previous >= 0) & (previous < request_start))
    since, before = previous[warm], request_start[warm]
    # Weight of the accesses in (since, before) that are re-accessed before ``before``: those
    # are not the last access of their block, and a distinct count skips them.
    repeated = np.zeros(len(warm))
    span = accesses + 1
    for level in range(int(accesses).bit_length()):
        key = (np.arange(accesses) >> level) * span + previous + 1
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        cumulative = np.concatenate(([0.0], np.cumsum(weights[order])))
        uses = np.flatnonzero((before >> level) & 1)
        cell = (before[uses] >> level) - 1
        low = np.searchsorted(sorted_key, cell * span + since[uses] + 1, side="right")
        high = np.searchsorted(sorted_key, (cell + 1) * span, side="left")
        repeated[uses] += cumulative[high] - cumulative[low]
    newer = weights[warm] + total[before] - total[since + 1] - repeated
    depth = np.zeros(accesses, dtype=np.int64) + NEVER
    depth[warm] = np.ceil(newer - _SLACK).astype(np.int64)
    in_order: npt.NDArray[np.int64] = depth[time_of]
    return in_order


def _prefix_depths(
    ids: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], block_weight: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """For each access, the smallest LRU capacity at which it is a prefix hit (``NEVER``: none)."""
    return _running_max(_depths(ids, lengths, block_weight), lengths)


def _running_max(depths: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """A block hits only when every block before it in its request does: a running maximum per request."""
    cap = int(depths[depths < NEVER].max()) + 2 if (depths < NEVER).any() else 2
    capped = np.minimum(depths, cap)
    offset = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths) * (cap + 1)
    running = np.maximum.accumulate(capped + offset) - offset
    prefix: npt.NDArray[np.int64] = np.where(running >= cap, NEVER, running)
    return prefix
