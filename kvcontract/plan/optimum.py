"""The offline optimum: Belady's MIN with bypass, under the replay's prefix-hit semantics.

After each request the cache keeps the blocks whose next use comes soonest and drops (or never
stores) the rest; no online policy can hit more. A block's next use is ordered by the request
that uses it next, then by its position there, so when block ``j + 1`` of a chain is needed
again, block ``j`` is needed no later: the optimum never keeps a block whose prefix it dropped,
and its hits are prefix hits.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

__all__ = ["optimal_hit_ratio"]


def optimal_hit_ratio(requests: Sequence[Sequence[int]], capacity: int) -> float:
    """The highest prefix-hit ratio any cache of ``capacity`` blocks reaches on ``requests``."""
    if capacity < 0:
        raise ValueError(f"capacity {capacity} is negative; give a number of blocks >= 0")
    width = max((len(request) for request in requests), default=0) + 1
    never = len(requests) * width
    next_use = _next_uses(requests, width, never)
    held: dict[int, int] = {}
    heap: list[tuple[int, int]] = []
    blocks = hits = 0
    for request, uses in zip(requests, next_use):
        blocks += len(request)
        for hash_id in request:
            if hash_id not in held:
                break
            hits += 1
        for hash_id, use in zip(request, uses):
            if use == never:
                held.pop(hash_id, None)
                continue
            held[hash_id] = use
            heapq.heappush(heap, (-use, hash_id))
        while len(held) > capacity:
            use, hash_id = heapq.heappop(heap)
            if held.get(hash_id) == -use:
                del held[hash_id]
    return hits / blocks if blocks else 0.0


def _next_uses(requests: Sequence[Sequence[int]], width: int, never: int) -> list[list[int]]:
    """For each block of each request, when it is used next (request * width + position)."""
    upcoming: dict[int, int] = {}
    uses: list[list[int]] = [[] for _ in requests]
    for number in range(len(requests) - 1, -1, -1):
        request = requests[number]
        uses[number] = [upcoming.get(hash_id, never) for hash_id in request]
        base = number * width
        for position, hash_id in enumerate(request):
            upcoming[hash_id] = base + position
    return uses
