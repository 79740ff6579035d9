"""Small jobs replayed as CUDA graphs: one launch where queuing the copies takes three or more.

The host pays for every kernel it queues (tens of microseconds each on a busy or
virtualised host), and a small job's stream spends most of its time waiting for the
next launch rather than moving bytes. A job of at most ``GRAPH_MAX_BYTES`` is padded to
a power-of-two number of blocks per group (repeating its last pair, which copies the
same bytes to the same place again) and run by a graph captured once for that shape,
which reads the job's block ids from a pinned buffer written just before the replay.
Only zero-copy engines use graphs: memcpy runs follow the rows, so their shape varies.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from kvcontract.transfer.copy_engine import Direction
from kvcontract.transfer.mapping import BlockMapping, GroupMapping
from kvcontract.transfer.staged_copy import PreparedJob, StagedCopier, block_pairs

__all__ = ["GRAPH_BUDGET_BYTES", "GRAPH_MAX_BYTES", "GraphedCopier", "GraphedJob"]

_log = logging.getLogger(__name__)

GRAPH_MAX_BYTES = 32 << 20
"""Largest padded job run as a graph; larger jobs keep the stream busy between launches."""

GRAPH_BUDGET_BYTES = 256 << 20
"""Staging that one engine's graphs may hold on the device; beyond it jobs run eagerly."""

_GRAPHS_PER_SHAPE = 2
"""Graphs per shape, so that a job can be queued while the last one of its shape runs."""

_Shape = tuple[Direction, tuple[tuple[int, int], ...]]


@dataclass(frozen=True)
class GraphedJob:
    """A captured job shape: its graph, the pinned ids it reads, and its last replay's end."""

    graph: torch.cuda.CUDAGraph
    ids: npt.NDArray[np.generic]
    """The pinned block ids the graph reads, as an array to write the next job's ids into."""
    prepared: PreparedJob
    """The buffers the graph was captured over."""
    done: torch.Event

    def replay(self) -> None:
        """Run the graph on the current stream with the ids written last."""
        self.graph.replay()
        self.done.record()


class GraphedCopier:
    """Captures and replays graphs of ``copier``'s jobs, per direction and padded shape."""

    def __init__(self, copier: StagedCopier) -> None:
        self._copier = copier
        self._device = copier.layout.device
        self._graphs: dict[_Shape, list[GraphedJob]] = {}
        self._bytes = 0
        self._capture_stream = torch.Stream(self._device)
        self._enabled = True

    def prepare(self, direction: Direction, mapping: BlockMapping) -> GraphedJob | None:
        """A graph of ``mapping``'s shape holding its ids, ready to replay; ``None``: go eager."""
        if not self._enabled or not mapping.groups:
            return None
        sizes = tuple((g.group, 1 << (g.gpu_ids.size - 1).bit_length()) for g in mapping.groups)
        nbytes = sum(count * self._copier.group_bytes(group) for group, count in sizes)
        if nbytes > GRAPH_MAX_BYTES:
            return None
        padded = BlockMapping(tuple(_padded(g, count) for g, (_, count) in zip(mapping.groups, sizes)), nbytes)
        graphs = self._graphs.setdefault((direction, sizes), [])
        ready = next((graph for graph in graphs if graph.done.query()), None)
        if ready is None:
            if len(graphs) >= _GRAPHS_PER_SHAPE or self._bytes + nbytes > GRAPH_BUDGET_BYTES:
                return None
            ready = self._capture(direction, padded)
            if ready is None:
                return None
            graphs.append(ready)
            self._bytes += nbytes
        ready.ids[...] = block_pairs(padded)
        return ready

    def _capture(self, direction: Direction, padded: BlockMapping) -> GraphedJob | None:
        prepared = self._copier.prepare(padded)
        graph = torch.cuda.CUDAGraph()
        try:
            with self._capture_stream:
                graph.capture_begin(capture_error_mode="thread_local")
                try:
                    self._copier.copy(direction, prepared)
                finally:
                    graph.capture_end()
        except RuntimeError as error:
            _log.warning("capturing a copy as a CUDA graph failed (%s); copying eagerly", error)
            self._enabled = False
            return None
        return GraphedJob(graph, prepared.ids.numpy(), prepared, torch.Event(self._device))


def _padded(group: GroupMapping, count: int) -> GroupMapping:
    """``group`` with its last pair repeated up to ``count`` pairs."""
    extra = count - group.gpu_ids.size
    return GroupMapping(
        group.group,
        np.concatenate((group.gpu_ids, np.repeat(group.gpu_ids[-1:], extra))),
        np.concatenate((group.host_rows, np.repeat(group.host_rows[-1:], extra))),
    )
