"""Runs copy jobs on a CUDA device: one stream per direction, events for completion and timing.

Each direction has its own stream, which first waits for the stream that was current at
submission, so a store never reads a block before the model wrote it. Events around
each job tell when it is done and how long it took on its stream. The copies themselves
follow :mod:`kvcontract.transfer.staged_copy`; the zero-copy way is used when the host
buffer is pinned and a kernel on the device is seen to reach pinned host memory, and
then small jobs replay CUDA graphs (:mod:`kvcontract.transfer.graphed_copy`).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass

import torch
from typing_extensions import override

from kvcontract.contracts import TransferResult
from kvcontract.transfer.copy_engine import CopyEngine, Direction
from kvcontract.transfer.device_view import device_alias
from kvcontract.transfer.graphed_copy import GraphedCopier, GraphedJob
from kvcontract.transfer.layout import KVCacheLayout
from kvcontract.transfer.mapping import BlockMapping
from kvcontract.transfer.staged_copy import PreparedJob, StagedCopier

__all__ = ["CudaCopyEngine"]

_log = logging.getLogger(__name__)


@dataclass
class _Job:
    job_id: int
    start: torch.Event
    end: torch.Event
    nbytes: int
    success: bool
    prepared: PreparedJob | GraphedJob | None
    """Held until the job is reported, as its copies read the prepared block ids."""


class CudaCopyEngine(CopyEngine):
    """Runs jobs on two CUDA streams through device staging, by zero-copy kernels or memcpy runs."""

    def __init__(self, layout: KVCacheLayout, host: torch.Tensor, *, zero_copy: bool | None = None) -> None:
        """``zero_copy``: ``None`` uses it when the host buffer allows, ``True`` requires it."""
        self._device = layout.device
        rows = host.view(-1, layout.bytes_per_gpu_block)
        view = device_alias(rows, self._device) if zero_copy is not False else None
        if zero_copy and view is None:
            raise ValueError(
                "zero-copy needs pinned host memory that the device can address; pass "
                "cuda_zero_copy=None to fall back to memcpy"
            )
        self._copier = StagedCopier(layout, rows, view)
        self._graphs = GraphedCopier(self._copier) if view is not None else None
        self._streams = {direction: torch.Stream(self._device) for direction in Direction}
        self._jobs: dict[Direction, deque[_Job]] = {direction: deque() for direction in Direction}
        self._lock = threading.Lock()

    @property
    @override
    def name(self) -> str:
        return "cuda-zero-copy" if self._copier.zero_copy else "cuda-memcpy"

    @override
    def submit(self, job_id: int, direction: Direction, mapping: BlockMapping) -> None:
        stream = self._streams[direction]
        start = torch.Event(self._device, enable_timing=True)
        end = torch.Event(self._device, enable_timing=True)
        compute = torch.accelerator.current_stream(self._device)
        prepared: PreparedJob | GraphedJob | None = None
        success = True
        with stream:
            stream.wait_stream(compute)
            try:
                graphed = self._graphs.prepare(direction, mapping) if self._graphs else None
                prepared = graphed if graphed is not None else self._copier.prepare(mapping)
                start.record(stream)
                if isinstance(prepared, GraphedJob):
                    prepared.replay()
                else:
                    self.enqueue(direction, prepared)
            except Exception:
                _log.exception("%s job %d failed", direction.value, job_id)
                success = False
            if prepared is None:
                start.record(stream)
            end.record(stream)
        job = _Job(job_id, start, end, mapping.nbytes, success, prepared)
        with self._lock:
            self._jobs[direction].append(job)

    @override
    def finished(self) -> list[TransferResult]:
        done: list[TransferResult] = []
        with self._lock:
            for jobs in self._jobs.values():
                while jobs and jobs[0].end.query():
                    job = jobs.popleft()
                    seconds = job.start.elapsed_time(job.end) / 1000
                    nbytes = job.nbytes if job.success else 0
                    done.append(TransferResult(job.job_id, job.success, nbytes, seconds))
        return done

    @override
    def wait(self, job_ids: Collection[int]) -> None:
        with self._lock:
            ends = [job.end for jobs in self._jobs.values() for job in jobs if job.job_id in job_ids]
        for end in ends:
            end.synchronize()

    @override
    def shutdown(self) -> None:
        for stream in self._streams.values():
            stream.synchronize()

    def enqueue(self, direction: Direction, job: PreparedJob) -> None:
        """Queue the copies of a prepared job on the current stream (the direction's stream)."""
        self._copier.copy(direction, job)
