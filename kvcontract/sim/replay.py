"""Replaying a trace through a manager as an engine's scheduler would, for hit ratio and speed.

Each request is served in the order of :mod:`kvcontract.engine_driver`. Keys and request
contexts are built before the clocks start: the times are manager time plus the loop's own
small bookkeeping.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeGuard, TypeVar

from kvcontract.contracts import OffloadingManager, ReqContext
from kvcontract.engine_driver.keys import key_chains
from kvcontract.engine_driver.orders import RequestServer, Served
from kvcontract.sim.trace import read_trace

__all__ = ["HasHashIds", "ReplayReport", "replay", "timed_replay"]

_K = TypeVar("_K")
_C = TypeVar("_C")


class HasHashIds(Protocol):
    """A request that names its prefix blocks, such as a ``TraceRequest``."""

    @property
    def hash_ids(self) -> Sequence[int]:
        """The request's prefix block hash ids, in order."""
        ...


Request = HasHashIds | Mapping[str, Sequence[int]] | Sequence[int]
"""A request: an object with ``hash_ids``, a mapping with a ``"hash_ids"`` entry, or the ids themselves."""


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """What a replay measured: blocks requested and found, stores that failed, evictions, time."""

    requests: int
    blocks: int
    hit_blocks: int
    failed_stores: int
    """Blocks past the hit prefix of requests whose ``prepare_store`` returned ``None``."""
    evictions: int
    seconds: float
    """Wall-clock time of the replay loop."""
    cpu_seconds: float
    """CPU time of the replaying thread over the same loop: unaffected by other load on the machine."""

    @property
    def hit_ratio(self) -> float:
        """Blocks found in the readable prefix over blocks requested (0.0 for no blocks)."""
        return self.hit_blocks / self.blocks if self.blocks else 0.0

    @property
    def us_per_block(self) -> float:
        """Replay wall-clock time per requested block, in microseconds."""
        return self.seconds * 1e6 / self.blocks if self.blocks else 0.0

    @property
    def cpu_us_per_block(self) -> float:
        """Replay CPU time per requested block, in microseconds."""
        return self.cpu_seconds * 1e6 / self.blocks if self.blocks else 0.0


def replay(manager: OffloadingManager, requests: str | os.PathLike[str] | Iterable[Request]) -> ReplayReport:
    """Serve ``requests`` (a Mooncake trace path, or requests with hash ids) through ``manager``."""
    if isinstance(requests, (str, os.PathLike)):
        requests = read_trace(requests)
    chains = key_chains(_hash_ids(request, number) for number, request in enumerate(requests))
    contexts = [ReqContext(str(number)) for number in range(len(chains))]
    return timed_replay(RequestServer(manager).serve, chains, contexts)


def timed_replay(
    serve: Callable[[Sequence[_K], _C], Served], chains: Sequence[Sequence[_K]], contexts: Sequence[_C]
) -> ReplayReport:
    """Each of ``chains`` served by ``serve`` under its context, timed: the loop every replay times.

    Requests of no key are passed over: an engine asks the manager nothing for them.
    """
    blocks = hit_blocks = failed = evictions = 0
    start, cpu_start = time.perf_counter(), time.thread_time()
    for keys, context in zip(chains, contexts):
        if not keys:
            continue
        served = serve(keys, context)
        blocks += len(keys)
        hit_blocks += served.found
        failed += served.failed
        evictions += served.evicted
    seconds, cpu_seconds = time.perf_counter() - start, time.thread_time() - cpu_start
    return ReplayReport(len(chains), blocks, hit_blocks, failed, evictions, seconds, cpu_seconds)


def _hash_ids(request: object, number: int) -> Sequence[int]:
    if _is_mapping(request):
        ids = request.get("hash_ids")
    elif _is_sequence(request):
        ids = request
    else:
        ids = getattr(request, "hash_ids", None)
    if not _is_id_sequence(ids):
        raise TypeError(
            f"request #{number} has no hash ids: give objects with a hash_ids sequence of ints, "
            f"mappings with a 'hash_ids' entry, or sequences of ints; got {request!r:.80}"
        )
    return ids


def _is_mapping(value: object) -> TypeGuard[Mapping[str, object]]:
    return isinstance(value, Mapping)


def _is_sequence(value: object) -> TypeGuard[Sequence[object]]:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _is_id_sequence(value: object) -> TypeGuard[Sequence[int]]:
    return _is_sequence(value) and all(type(item) is int for item in value)
