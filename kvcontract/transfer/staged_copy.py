"""How the CUDA engine moves one job's blocks: gather on the device, one crossing, scatter.

A store gathers the job's blocks of each KV tensor into a device staging buffer laid
out like host rows (one indexed-copy kernel per tensor), then moves the staging rows to
their host rows in one of two ways:

- with a device view of the host buffer (``host_view``: pinned memory that kernels can
  address through unified addressing), one indexed-copy kernel writes every row to its
  host row, however scattered;
- without one, one ``copy_`` (a ``cudaMemcpyAsync``) per run of consecutive host rows.

A load runs the same steps backwards. Everything is queued on the current stream; on
CPU tensors the same steps run synchronously, which is how the tests check the plan.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import torch

from kvcontract.transfer.engine import Direction
from kvcontract.transfer.layout import KVCacheLayout
from kvcontract.transfer.mapping import BlockMapping, GroupMapping

__all__ = ["STAGING_BYTES", "StagedCopier"]

STAGING_BYTES = 64 << 20
"""Device staging memory per step of a job; larger jobs go through it in several steps."""

_WORD_TYPES = (torch.int64, torch.int32, torch.int16)


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
        self._view = host_view

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
        return self._view is not None

    def copy(self, direction: Direction, mapping: BlockMapping) -> None:
        """Queue the copies of ``mapping`` on the current stream."""
        for group in mapping.groups:
            pairs = torch.as_tensor(np.stack((group.gpu_ids, group.host_rows)))
            if self._device.type == "cuda":
                pairs = pairs.pin_memory().to(self._device, non_blocking=True)
            width = self._layout.groups[group.group].bytes_per_block
            step = max(1, STAGING_BYTES // width)
            for begin in range(0, group.gpu_ids.size, step):
                ids = pairs[:, begin : begin + step]
                wanted = group.host_rows[begin : begin + step]
                if direction is Direction.STORE:
                    self._store(group, ids, wanted)
                else:
                    self._load(group, ids, wanted)

    def _store(self, group: GroupMapping, ids: torch.Tensor, wanted: npt.NDArray[np.int64]) -> None:
        layout = self._layout.groups[group.group]
        width = layout.bytes_per_block
        staging = torch.empty((ids.shape[1], width), dtype=torch.uint8, device=self._device)
        for plane, offset in zip(layout.planes, layout.offsets):
            cols = staging[:, offset : offset + plane.block_bytes]
            blocks, cols_words = _words(plane.rows, cols)
            if cols.is_contiguous():
                torch.index_select(blocks, 0, ids[0], out=cols_words)
            else:
                cols_words.copy_(torch.index_select(blocks, 0, ids[0]))
        if self._view is not None:
            host, staged = _words(self._view[:, :width], staging)
            host.index_copy_(0, ids[1], staged)
        else:
            for row, at, count in self._runs(wanted, width):
                host_rows = self._rows[row : row + count, :width]
                host_rows.copy_(staging[at : at + count], non_blocking=True)

    def _load(self, group: GroupMapping, ids: torch.Tensor, wanted: npt.NDArray[np.int64]) -> None:
        layout = self._layout.groups[group.group]
        width = layout.bytes_per_block
        staging = torch.empty((ids.shape[1], width), dtype=torch.uint8, device=self._device)
        if self._view is not None:
            host, staged = _words(self._view[:, :width], staging)
            torch.index_select(host, 0, ids[1], out=staged)
        else:
            for row, at, count in self._runs(wanted, width):
                host_rows = self._rows[row : row + count, :width]
                staging[at : at + count].copy_(host_rows, non_blocking=True)
        for plane, offset in zip(layout.planes, layout.offsets):
            blocks, cols = _words(plane.rows, staging[:, offset : offset + plane.block_bytes])
            blocks.index_copy_(0, ids[0], cols)

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


def _words(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Byte tensors viewed as the widest integer type they all allow: fewer, wider accesses."""
    for dtype in _WORD_TYPES:
        try:
            return tuple(t.view(dtype) for t in tensors)
        except RuntimeError:
            continue
    return tensors
