"""How the CUDA engine moves one job's blocks: gather on the device, one crossing, scatter.

A store gathers the job's blocks of each KV tensor into a device staging buffer laid
out like host rows (one indexed-copy kernel per tensor), then moves the staging rows to
their host rows in one of two ways:

- with a device view of the host buffer (``host_view``: pinned memory that kernels can
  address through unified addressing), one indexed-copy kernel writes every row to its
  host row, however scattered;
- without one, one ``copy_`` (a ``cudaMemcpyAsync``) per run of consecutive host rows.

A load runs the same steps backwards. A job is prepared first (its block ids as a
pinned index tensor, host-side work that needs no stream), then queued on the current
stream with as few launches as possible: every launch the host makes while the stream
waits is time the job takes. On CPU tensors the same steps run synchronously, which is
how the tests check the plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from kvcontract.transfer.copy_engine import Direction
from kvcontract.transfer.device_view import on_device
from kvcontract.transfer.layout import KVCacheGroup, KVCacheLayout
from kvcontract.transfer.mapping import BlockMapping

__all__ = ["STAGING_BYTES", "PreparedJob", "PreparedStep", "StagedCopier", "block_pairs"]

STAGING_BYTES = 64 << 20
"""Device staging memory per step of a job; larger jobs go through it in several steps."""

_WORD_TYPES = (torch.complex128, torch.int64, torch.int32, torch.int16, torch.uint8)


@dataclass(frozen=True)
class PreparedStep:
    """Up to a staging buffer's worth of one group's blocks, with every view its copies use."""

    group: int
    gpu_ids: torch.Tensor
    """The GPU block ids, on the device."""
    host_ids: torch.Tensor
    """The host rows, on the device."""
    host_rows: npt.NDArray[np.int64]
    """The host rows on the host, for planning memcpy runs."""
    staging: torch.Tensor
    """``(n, words)``: one row per block, laid out like its host row."""
    planes: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    """Per KV tensor: its block rows as words, and its columns of ``staging``."""


@dataclass(frozen=True)
class PreparedJob:
    """A job ready to queue; keep it until the job is done, as its copies read ``ids``.

    ``ids`` holds, on the host (pinned for a CUDA device), every GPU block id of the job,
    group after group, over the host row each pairs with; ``source`` is what the first
    copy reads them from (``ids`` itself, or a device view of it), into ``device_ids``.
    """

    ids: torch.Tensor
    source: torch.Tensor
    device_ids: torch.Tensor
    steps: tuple[PreparedStep, ...]


@dataclass(frozen=True)
class _GroupWords:
    """A group's tensors as the widest words (16 to 1 bytes) they all allow: fewer accesses."""

    dtype: torch.dtype
    planes: tuple[tuple[torch.Tensor, int, int], ...]
    """Per plane: its block rows as words, its first word in a staging row, its width."""
    width: int
    """Bytes of the group's part of a host row."""
    host: torch.Tensor | None
    """The device view of the host rows' first ``width`` bytes as words, if there is one."""

    @classmethod
    def of(cls, group: KVCacheGroup, host_view: torch.Tensor | None) -> _GroupWords:
        width = group.bytes_per_block
        spans = [*zip(group.offsets, (p.block_bytes for p in group.planes)), (0, width)]
        for dtype in _WORD_TYPES:
            size = dtype.itemsize
            if any(at % size or count % size for at, count in spans):
                continue
            try:
                planes = tuple(
                    (plane.rows.view(dtype), at // size, plane.block_bytes // size)
                    for plane, at in zip(group.planes, group.offsets)
                )
                host = None if host_view is None else host_view[:, :width].view(dtype)
            except RuntimeError:
                continue
            return cls(dtype, planes, width, host)
        raise AssertionError("uint8 words always fit")


def block_pairs(mapping: BlockMapping) -> npt.NDArray[np.int64]:
    """``(2, n)``: every GPU block id of ``mapping``, group after group, over its host row."""
    empty = [np.zeros(0, np.int64)]
    return np.stack(
        (
            np.concatenate([g.gpu_ids for g in mapping.groups] or empty),
            np.concatenate([g.host_rows for g in mapping.groups] or empty),
        )
    )


class StagedCopier:
    """Copies jobs between the KV tensors of ``layout`` and ``host_rows`` through device staging.

    ``host_rows`` is the host buffer as ``(num_host_blocks * k, bytes_per_gpu_block)``;
    ``host_view``, if given, is the same memory as a tensor on the KV tensors' device.
    """

    def __init__(self, layout: KVCacheLayout, host_rows: torch.Tensor, host_view: torch.Tensor | None) -> None:
        self._layout = layout
        self._device = layout.device
        self._rows = host_rows
        self._zero_copy = host_view is not None
        self._groups = tuple(_GroupWords.of(group, host_view) for group in layout.groups)
        largest = max([host_rows.shape[0], *(group.num_blocks for group in layout.groups)])
        self._narrow = self._zero_copy and largest < 2**31

    @property
    def layout(self) -> KVCacheLayout:
        """The KV tensors copied from and to."""
        return self._layout

    @property
    def host_rows(self) -> torch.Tensor:
        """The host buffer, one row per GPU block of an offload block."""
        return self._rows

    @property
    def zero_copy(self) -> bool:
        """Whether kernels write and read host rows directly."""
        return self._zero_copy

    def group_bytes(self, group: int) -> int:
        """Bytes of one block of KV-cache group ``group`` (its part of a host row)."""
        return self._groups[group].width

    def prepare(self, mapping: BlockMapping) -> PreparedJob:
        """The job's work that needs no stream: index tensors, staging, every view.

        With a device view of host memory the ids are 32-bit and the first kernel reads
        them from pinned memory as it widens them: a kernel starts sooner than a copy.
        """
        groups = mapping.groups
        pairs = block_pairs(mapping)
        narrow = self._narrow and pairs.size > 0
        ids = torch.as_tensor(pairs.astype(np.int32) if narrow else pairs)
        source = ids
        if self._device.type == "cuda" and pairs.size:
            ids = source = ids.pin_memory()
            view = on_device(ids, self._device) if narrow else None
            if view is not None:
                source = view
        device_ids = torch.empty(ids.shape, dtype=torch.int64, device=self._device)
        sizes = [max(1, STAGING_BYTES // self._groups[g.group].width) for g in groups]
        widths = [self._groups[g.group].width for g in groups]
        most = max((min(size, g.gpu_ids.size) * w for size, g, w in zip(sizes, groups, widths)), default=0)
        raw = torch.empty(most, dtype=torch.uint8, device=self._device)
        steps: list[PreparedStep] = []
        first = 0
        for size, group in zip(sizes, groups):
            words = self._groups[group.group]
            for begin in range(0, group.gpu_ids.size, size):
                rows = group.host_rows[begin : begin + size]
                at = first + begin
                staging = raw[: rows.size * words.width].view(words.dtype).view(rows.size, -1)
                steps.append(
                    PreparedStep(
                        group.group,
                        device_ids[0, at : at + rows.size],
                        device_ids[1, at : at + rows.size],
                        rows,
                        staging,
                        tuple((p, staging[:, w : w + n]) for p, w, n in words.planes),
                    )
                )
            first += group.gpu_ids.size
        return PreparedJob(ids, source, device_ids, tuple(steps))

    def copy(self, direction: Direction, job: PreparedJob) -> None:
        """Queue the copies of a prepared job on the current stream."""
        if not job.steps:
            return
        job.device_ids.copy_(job.source, non_blocking=True)
        for step in job.steps:
            host = self._groups[step.group].host
            if direction is Direction.STORE:
                self._store(step, host)
            else:
                self._load(step, host)

    def _store(self, step: PreparedStep, host: torch.Tensor | None) -> None:
        for blocks, cols in step.planes:
            if cols.is_contiguous():
                torch.index_select(blocks, 0, step.gpu_ids, out=cols)
            else:
                cols.copy_(torch.index_select(blocks, 0, step.gpu_ids))
        if host is not None:
            host.index_copy_(0, step.host_ids, step.staging)
            return
        staged = step.staging.view(torch.uint8)
        width = staged.shape[1]
        for row, at, count in self._runs(step.host_rows, width):
            self._rows[row : row + count, :width].copy_(staged[at : at + count], non_blocking=True)

    def _load(self, step: PreparedStep, host: torch.Tensor | None) -> None:
        if host is not None:
            torch.index_select(host, 0, step.host_ids, out=step.staging)
        else:
            staged = step.staging.view(torch.uint8)
            width = staged.shape[1]
            for row, at, count in self._runs(step.host_rows, width):
                staged[at : at + count].copy_(self._rows[row : row + count, :width], non_blocking=True)
        for blocks, cols in step.planes:
            blocks.index_copy_(0, step.gpu_ids, cols)

    def _runs(self, host_rows: npt.NDArray[np.int64], width: int) -> Iterator[tuple[int, int, int]]:
        """``(first host row, first pair, count)`` per memcpy: runs of consecutive host rows
        when rows are used whole (so a run is contiguous), else one row at a time."""
        rows: list[int] = host_rows.tolist()
        whole = width == self._rows.shape[1]
        at = 0
        while at < len(rows):
            count = 1
            while whole and at + count < len(rows) and rows[at + count] == rows[at] + count:
                count += 1
            yield rows[at], at, count
            at += count
