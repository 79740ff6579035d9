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

from kvcontract.transfer.engine import Direction
from kvcontract.transfer.layout import KVCacheGroup, KVCacheLayout
from kvcontract.transfer.mapping import BlockMapping

__all__ = ["STAGING_BYTES", "PreparedJob", "PreparedStep", "StagedCopier"]

STAGING_BYTES = 64 << 20
"""Device staging memory per step of a job; larger jobs go through it in several steps."""

_WORD_TYPES = (torch.int64, torch.int32, torch.int16, torch.uint8)


@dataclass(frozen=True)
class PreparedStep:
    """Up to a staging buffer's worth of one group's block pairs: columns ``begin:end``."""

    group: int
    begin: int
    end: int
    host_rows: npt.NDArray[np.int64]
    """The step's host rows, for planning memcpy runs."""


@dataclass(frozen=True)
class PreparedJob:
    """A job ready to queue; keep it until the job is done, as the copies read ``pairs``.

    ``pairs`` is ``(2, n)`` on the host (pinned for a CUDA device): every GPU block id of
    the job, group after group, over the host row it pairs with.
    """

    pairs: torch.Tensor
    steps: tuple[PreparedStep, ...]


@dataclass(frozen=True)
class _GroupWords:
    """One group's tensors seen as the widest integer words they all allow: fewer accesses."""

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


class StagedCopier:
    """Copies jobs between the KV tensors of ``layout`` and ``host_rows`` through device staging.

    ``host_rows`` is the host buffer as ``(num_host_blocks * k, bytes_per_gpu_block)``;
    ``host_view``, if given, is the same memory as a tensor on the KV tensors' device.
    """

    def __init__(
        self, layout: KVCacheLayout, host_rows: torch.Tensor, host_view: torch.Tensor | None
    ) -> None:
        self._layout = layout
        self._device = layout.device
        self._rows = host_rows
        self._zero_copy = host_view is not None
        self._groups = tuple(_GroupWords.of(group, host_view) for group in layout.groups)

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

    def prepare(self, mapping: BlockMapping) -> PreparedJob:
        """The host-side work of a job: its block pairs as one index tensor, split into steps."""
        groups = mapping.groups
        pairs = torch.as_tensor(
            np.stack(
                (
                    np.concatenate([g.gpu_ids for g in groups] or [np.zeros(0, np.int64)]),
                    np.concatenate([g.host_rows for g in groups] or [np.zeros(0, np.int64)]),
                )
            )
        )
        if self._device.type == "cuda" and pairs.numel():
            pairs = pairs.pin_memory()
        steps: list[PreparedStep] = []
        first = 0
        for group in groups:
            size = max(1, STAGING_BYTES // self._groups[group.group].width)
            for begin in range(0, group.gpu_ids.size, size):
                rows = group.host_rows[begin : begin + size]
                steps.append(
                    PreparedStep(group.group, first + begin, first + begin + rows.size, rows)
                )
            first += group.gpu_ids.size
        return PreparedJob(pairs, tuple(steps))

    def copy(self, direction: Direction, job: PreparedJob) -> None:
        """Queue the copies of a prepared job on the current stream."""
        if not job.steps:
            return
        pairs = job.pairs.to(self._device, non_blocking=True)
        for step in job.steps:
            ids = pairs[:, step.begin : step.end]
            words = self._groups[step.group]
            if direction is Direction.STORE:
                self._store(words, ids, step.host_rows)
            else:
                self._load(words, ids, step.host_rows)

    def _store(
        self, words: _GroupWords, ids: torch.Tensor, rows: npt.NDArray[np.int64]
    ) -> None:
        staging = self._staging(words, ids.shape[1])
        for blocks, at, count in words.planes:
            cols = staging[:, at : at + count]
            if cols.is_contiguous():
                torch.index_select(blocks, 0, ids[0], out=cols)
            else:
                cols.copy_(torch.index_select(blocks, 0, ids[0]))
        if words.host is not None:
            words.host.index_copy_(0, ids[1], staging)
            return
        staged = staging.view(torch.uint8)
        for row, at, count in self._runs(rows, words.width):
            self._rows[row : row + count, : words.width].copy_(
                staged[at : at + count], non_blocking=True
            )

    def _load(self, words: _GroupWords, ids: torch.Tensor, rows: npt.NDArray[np.int64]) -> None:
        staging = self._staging(words, ids.shape[1])
        if words.host is not None:
            torch.index_select(words.host, 0, ids[1], out=staging)
        else:
            staged = staging.view(torch.uint8)
            for row, at, count in self._runs(rows, words.width):
                staged[at : at + count].copy_(
                    self._rows[row : row + count, : words.width], non_blocking=True
                )
        for blocks, at, count in words.planes:
            blocks.index_copy_(0, ids[0], staging[:, at : at + count])

    def _staging(self, words: _GroupWords, count: int) -> torch.Tensor:
        return torch.empty(
            (count, words.width // words.dtype.itemsize), dtype=words.dtype, device=self._device
        )

    def _runs(
        self, host_rows: npt.NDArray[np.int64], width: int
    ) -> Iterator[tuple[int, int, int]]:
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
