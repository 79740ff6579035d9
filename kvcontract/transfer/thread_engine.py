"""Copies between KV-cache tensors and the host buffer when both are in host memory.

One background thread per direction runs the jobs in order. A job becomes a list of
pages (one block of one tensor: a contiguous run of bytes on both sides); pages that
follow each other on both sides are merged, and each remaining run is copied once,
which gathering into a staging buffer and scattering from it cannot (it moves bytes
twice). The runs are copied by the compiled loop (``run_copy``) when the package was
built with a C compiler: one call per job, a ``memmove`` per run, with the GIL released,
so Python threads run beside the copy. Without it, a run is a slice assignment on one
memoryview that spans every registered tensor: about 0.4 µs of Python per run (a
``ctypes.memmove`` call costs 0.7 µs), a quarter of a 16 KiB copy, and the copy holds the
GIL, so a busy Python thread and the copy thread take turns (the interpreter's switch
interval, 5 ms by default); runs longer than ``GIL_SLICE_BYTES`` are then copied a slice at
a time, so no single copy holds the GIL long.
"""

from __future__ import annotations

import ctypes
import logging
import queue
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from typing_extensions import override

from kvcontract.contracts import TransferResult
from kvcontract.transfer.copy_engine import CopyEngine, Direction
from kvcontract.transfer.layout import KVCacheGroup, KVCacheLayout
from kvcontract.transfer.mapping import BlockMapping, GroupMapping
from kvcontract.transfer.run_copy import compiled_copy_runs

__all__ = ["GIL_SLICE_BYTES", "Pages", "ThreadCopyEngine"]

GIL_SLICE_BYTES = 1 << 20
"""The Python loop's longest single copy under the GIL (about 0.2 ms): longer runs go in slices of this size."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pages:
    """Byte runs to copy: run ``i`` is ``sizes[i]`` bytes from offset ``src[i]`` to ``dst[i]``.

    Offsets count from the lowest address of the engine's tensors, the start of its span.
    """

    dst: npt.NDArray[np.int64]
    src: npt.NDArray[np.int64]
    sizes: npt.NDArray[np.int64]


@dataclass(frozen=True)
class _Job:
    job_id: int
    direction: Direction
    mapping: BlockMapping


@dataclass(frozen=True)
class _GroupAddresses:
    """Per-plane start in the span, row stride, row width and start in host row 0, of one group."""

    bases: npt.NDArray[np.int64]
    strides: npt.NDArray[np.int64]
    widths: npt.NDArray[np.int64]
    host_bases: npt.NDArray[np.int64]
    width: int | None
    """The planes' one width when they share it (pages then need no sizes column)."""

    @classmethod
    def of(cls, group: KVCacheGroup, span_base: int, host_offset: int) -> _GroupAddresses:
        def column(values: list[int]) -> npt.NDArray[np.int64]:
            return np.array(values, dtype=np.int64)

        widths = {p.block_bytes for p in group.planes}
        return cls(
            column([p.rows.data_ptr() - span_base for p in group.planes]),
            column([p.row_stride for p in group.planes]),
            column([p.block_bytes for p in group.planes]),
            column([host_offset + offset for offset in group.offsets]),
            widths.pop() if len(widths) == 1 else None,
        )


class ThreadCopyEngine(CopyEngine):
    """Copies on background threads (one per direction), one copy per contiguous run.

    ``compiled_loop=None`` copies with the compiled loop when the package has it, ``False``
    with the Python loop; ``True`` requires the compiled one.
    """

    def __init__(self, layout: KVCacheLayout, host: torch.Tensor, *, compiled_loop: bool | None = None) -> None:
        if layout.device.type != "cpu" or host.device.type != "cpu":
            raise ValueError(f"ThreadCopyEngine copies within host memory; the KV caches are on {layout.device}")
        if compiled_loop and compiled_copy_runs is None:
            raise ValueError(
                "compiled_loop=True, but kvcontract was installed without its compiled copy loop "
                "(no C compiler at install): reinstall it where gcc or cc is on PATH, or pass "
                "compiled_loop=False"
            )
        self._compiled = None if compiled_loop is False else compiled_copy_runs
        self._layout = layout  # keeps alive the memory the copies address by raw pointer
        self._host = host
        self._row_bytes = layout.bytes_per_gpu_block
        tensors = [host, *(plane.rows for group in layout.groups for plane in group.planes)]
        span_base = min(tensor.data_ptr() for tensor in tensors)
        span_end = max(_end_address(tensor) for tensor in tensors)
        span = (ctypes.c_char * (span_end - span_base)).from_address(span_base)
        self._span = memoryview(span).cast("B")
        host_offset = host.data_ptr() - span_base
        self._addresses = tuple(_GroupAddresses.of(group, span_base, host_offset) for group in layout.groups)
        self._lock = threading.Lock()
        self._done: list[TransferResult] = []
        self._running: dict[int, threading.Event] = {}
        self._queues: dict[Direction, queue.SimpleQueue[_Job | None]] = {
            direction: queue.SimpleQueue() for direction in Direction
        }
        self._threads = [
            threading.Thread(
                target=self._serve,
                args=(self._queues[direction],),
                name=f"kvcontract-{direction.value}",
                daemon=True,
            )
            for direction in Direction
        ]
        for thread in self._threads:
            thread.start()

    @property
    @override
    def name(self) -> str:
        return "cpu-threads" if self._compiled is not None else "cpu-threads-python-loop"

    @override
    def submit(self, job_id: int, direction: Direction, mapping: BlockMapping) -> None:
        with self._lock:
            self._running[job_id] = threading.Event()
        self._queues[direction].put(_Job(job_id, direction, mapping))

    @override
    def finished(self) -> list[TransferResult]:
        with self._lock:
            done, self._done = self._done, []
        return done

    @override
    def wait(self, job_ids: Collection[int]) -> None:
        with self._lock:
            events = [self._running[i] for i in job_ids if i in self._running]
        for event in events:
            event.wait()

    @override
    def shutdown(self) -> None:
        for jobs in self._queues.values():
            jobs.put(None)
        for thread in self._threads:
            thread.join()

    def run(self, direction: Direction, mapping: BlockMapping) -> None:
        """Copy every pair of ``mapping`` now, on the calling thread."""
        for group in mapping.groups:
            self.copy_pages(self.pages(direction, group))

    def pages(self, direction: Direction, mapping: GroupMapping) -> Pages:
        """One group's byte runs, block by block and plane by plane, merged where contiguous.

        A job's fixed cost is mostly these few numpy calls (a few µs each), so they are kept few:
        each address column takes two, and planes of one width need no sizes column.
        """
        at = self._addresses[mapping.group]
        gpu = mapping.gpu_ids[:, None] * at.strides
        gpu += at.bases
        host = (mapping.host_rows * self._row_bytes)[:, None] + at.host_bases
        src, dst = (gpu, host) if direction is Direction.STORE else (host, gpu)
        if at.width is None:
            return _merged(dst.ravel(), src.ravel(), np.broadcast_to(at.widths, gpu.shape).ravel())
        return _merged_uniform(dst.ravel(), src.ravel(), at.width)

    def copy_pages(self, pages: Pages) -> None:
        """Copy each run of ``pages`` in order: by the compiled loop, else by memoryview assignment."""
        if self._compiled is not None:
            self._compiled(self._span, pages.dst, pages.src, pages.sizes)
            return
        span = self._span
        for dst, src, size in zip(pages.dst.tolist(), pages.src.tolist(), pages.sizes.tolist()):
            if size <= GIL_SLICE_BYTES:
                span[dst : dst + size] = span[src : src + size]
                continue
            for start in range(0, size, GIL_SLICE_BYTES):
                end = min(start + GIL_SLICE_BYTES, size)
                span[dst + start : dst + end] = span[src + start : src + end]

    def _serve(self, jobs: queue.SimpleQueue[_Job | None]) -> None:
        while (job := jobs.get()) is not None:
            start = time.perf_counter()
            try:
                self.run(job.direction, job.mapping)
                success = True
            except Exception:
                _log.exception("%s job %d failed", job.direction.value, job.job_id)
                success = False
            result = TransferResult(
                job.job_id,
                success,
                job.mapping.nbytes if success else 0,
                time.perf_counter() - start,
            )
            with self._lock:
                self._done.append(result)
                event = self._running.pop(job.job_id)
            event.set()


def _end_address(tensor: torch.Tensor) -> int:
    """One past the last byte of non-empty ``tensor`` (its storage may reach further)."""
    last = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
    return tensor.data_ptr() + (last + 1) * tensor.element_size()


def _merged(dst: npt.NDArray[np.int64], src: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64]) -> Pages:
    """Merge each run into the one before it when both its ends follow on."""
    follows = (dst[1:] == dst[:-1] + sizes[:-1]) & (src[1:] == src[:-1] + sizes[:-1])
    if not follows.any():
        return Pages(dst, src, sizes)
    starts = np.flatnonzero(np.concatenate(([True], ~follows)))
    ends = np.append(starts[1:], sizes.size)
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    sizes = offsets[ends] - offsets[starts]
    return Pages(dst[starts], src[starts], sizes)


def _merged_uniform(dst: npt.NDArray[np.int64], src: npt.NDArray[np.int64], width: int) -> Pages:
    """``_merged`` for runs that all have ``width`` bytes, without a sizes column."""
    follows = dst[1:] - dst[:-1] == width
    follows &= src[1:] - src[:-1] == width
    sizes = np.full_like(dst, width)
    if not np.count_nonzero(follows):
        return Pages(dst, src, sizes)
    return _merged(dst, src, sizes)
