"""LRU's whole hit-ratio curve from one pass over a trace (Mattson's stack distances), and SHARDS.

Under the replay's semantics (look up the readable prefix, store the whole request, touch it
with the first key most recent) an LRU cache of ``c`` blocks holds exactly the ``c`` most
recent blocks of one recency stack, whatever ``c`` is, as long as every request fits. So one
pass that finds each block's depth in that stack answers every capacity at once: a block is a
prefix hit at capacity ``c`` when it and every block before it in its request sit at depth
``c`` or less. Depths are counted with a bit array of "last access" times split into rows of
``_ROW`` entries with per-row counts, vectorised per request, so the pass costs a few numpy
calls per request rather than a Python loop per block.

SHARDS (Waldspurger et al., FAST'15) keeps the blocks whose hashed id falls below a rate and
scales their depths up by the inverse rate: a curve from a fraction of the work, with an error
that ``tools/bench_plan.py`` measures against the exact curve.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["HitCurve", "lru_hit_curve", "shards_hit_curve"]

_ROW = 512
_MIX = np.uint64(0x9E3779B97F4A7C15)
_NEVER = np.iinfo(np.int64).max


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


def lru_hit_curve(requests: Sequence[Sequence[int]]) -> HitCurve:
    """LRU's exact prefix-hit curve over ``requests`` (each a request's block hash ids, in order)."""
    ids, lengths = _flatten(requests)
    depths = _prefix_depths(ids, lengths)
    return _curve(depths, weight=1.0, blocks=len(ids), lengths=lengths)


def shards_hit_curve(requests: Sequence[Sequence[int]], rate: float, *, seed: int = 0) -> HitCurve:
    """LRU's prefix-hit curve estimated from the blocks whose hashed id samples at ``rate`` (SHARDS).

    Depths of the sampled blocks are scaled by ``1 / rate``; the difference between the expected
    and the actual count of sampled accesses goes to the first bucket (SHARDS-adj), which
    removes most of the bias that a few very frequent blocks bring. ``seed`` picks another
    independent sample.
    """
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"sampling rate {rate} is outside (0, 1]; give for example 0.01 for 1 %")
    ids, lengths = _flatten(requests)
    keep = _sampled(ids, rate, seed)
    request_of = np.repeat(np.arange(len(lengths)), lengths)
    depths = _prefix_depths(ids[keep], np.bincount(request_of[keep], minlength=len(lengths)))
    scaled: npt.NDArray[np.int64] = np.array(depths, dtype=np.int64)
    hit = depths < _NEVER
    scaled[hit] = np.ceil(depths[hit] / rate).astype(np.int64)
    curve = _curve(scaled, weight=1.0 / rate, blocks=len(ids), lengths=lengths)
    adjustment = (rate * len(ids) - np.count_nonzero(keep)) / rate
    adjusted: npt.NDArray[np.float64] = np.maximum(curve.hits_at + adjustment, 0.0)
    return HitCurve(adjusted, curve.blocks, curve.longest_request)


def _sampled(ids: npt.NDArray[np.int64], rate: float, seed: int) -> npt.NDArray[np.bool_]:
    """Which accesses belong to sampled blocks: a multiplicative hash of the block number and seed."""
    numbers: npt.NDArray[np.uint64] = ids.astype(np.uint64)
    offset = np.uint64(seed * int(_MIX) % 2**64)
    mixed: npt.NDArray[np.uint64] = np.multiply(numbers + offset, _MIX)
    sampled: npt.NDArray[np.bool_] = mixed <= np.uint64(int(rate * 2.0**64) - 1)
    return sampled


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


def _prefix_depths(ids: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """For each access, the smallest LRU capacity at which it is a prefix hit (``_NEVER``: none)."""
    never = _NEVER
    accesses = len(ids)
    rows = accesses // _ROW + 1
    active = np.zeros((rows, _ROW), dtype=np.bool_)
    flat: npt.NDArray[np.bool_] = active.ravel()
    row_counts = np.zeros(rows, dtype=np.int64)
    last: npt.NDArray[np.int64] = np.zeros(int(ids.max()) + 1 if accesses else 0, dtype=np.int64) - 1
    columns = np.arange(_ROW)
    out = np.empty(accesses, dtype=np.int64)
    held = 0
    start = 0
    for length in lengths.tolist():
        if not length:
            continue
        end = start + length
        keys = ids[start:end]
        previous = last[keys]
        warm = previous >= 0
        depth: npt.NDArray[np.int64] = np.zeros(length, dtype=np.int64) + never
        if warm.any():
            times = previous[warm]
            row, column = np.divmod(times, _ROW)
            before_row = np.cumsum(row_counts) - row_counts
            within = (active[row] & (columns <= column[:, None])).sum(axis=1)
            depth[warm] = held - (before_row[row] + within) + 1
            flat[times] = False
            np.subtract.at(row_counts, row, 1)
        # The request's first key is the most recent: it gets the latest of its times.
        now = np.arange(end - 1, start - 1, -1, dtype=np.int64)
        flat[now] = True
        np.add.at(row_counts, now // _ROW, 1)
        last[keys] = now
        held += length - int(np.count_nonzero(warm))
        out[start:end] = np.maximum.accumulate(depth)
        start = end
    return out


def _curve(
    depths: npt.NDArray[np.int64], *, weight: float, blocks: int, lengths: npt.NDArray[np.int64]
) -> HitCurve:
    finite = depths[depths < _NEVER]
    counts = np.bincount(finite, minlength=1).astype(np.float64) * weight
    longest = int(lengths.max()) if len(lengths) else 0
    return HitCurve(np.cumsum(counts), blocks, longest)
