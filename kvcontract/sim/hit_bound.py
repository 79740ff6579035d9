"""The hit ratio no capacity passes on a list of requests: the bound a run's hit ratio is read against."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["unbounded_hit_ratio"]


def unbounded_hit_ratio(requests: Sequence[Sequence[int]]) -> float:
    """Prefix hits over blocks with room for every block: each request's leading blocks seen before (0 with no blocks)."""
    seen: set[int] = set()
    hits = blocks = 0
    for request in requests:
        for hash_id in request:
            if hash_id not in seen:
                break
            hits += 1
        seen.update(request)
        blocks += len(request)
    return hits / blocks if blocks else 0.0
