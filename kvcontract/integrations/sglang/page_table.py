"""Where a page of SGLang's host pool lies for a kvcontract tier: rows of the pool itself, or staging rows.

kvcontract's tiers move whole rows of a ``(blocks, bytes)`` uint8 table. On ``page_unified``
(one run of bytes per page, page-major) the pool's buffer is that table with page ``p`` at row
``p``. On SGLang's page-first layouts (``page_first``, ``page_first_direct``, ``page_head``) the
pool's one buffer viewed as bytes is such a table without a copy too: SGLang's own zero-copy metadata
(``get_page_buffer_meta``) puts each page in one region (MLA) or two (K at row ``p``, V at row
``page_num + p``) of equal size, and the tier reads and writes those rows in place, a key per
region. Other layouts (``layer_first`` scatters a page over every layer) take the copying path:
a page is gathered into a staging row of the backend's own with SGLang's ``get_data_page`` and
scattered back with ``set_from_flat_data_page``, one key per page.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

__all__ = ["HostPool", "PageTable", "StagingRows", "page_table"]

ZERO_COPY_LAYOUTS = frozenset({"page_first", "page_first_direct", "page_head", "page_unified"})
UNIFIED_LAYOUTS = frozenset({"page_unified"})
"""Layouts whose buffer is page-major with a page's bytes in one run: page ``p`` is row ``p`` (SGLang gives them no page metadata)."""
COPYING_LAYOUTS = frozenset({"layer_first"})


class HostPool(Protocol):
    """What the backend reads of SGLang's ``HostKVCache``: its geometry, its buffer and its page copies."""

    layout: str
    page_size: int
    dtype: torch.dtype

    @property
    def kv_buffer(self) -> object: ...

    def get_page_buffer_meta(self, indices: torch.Tensor) -> tuple[list[int], list[int]]: ...

    def get_data_page(self, index: int, flat: bool = True) -> torch.Tensor: ...

    def set_from_flat_data_page(self, index: int, data_page: torch.Tensor) -> None: ...


@dataclass(frozen=True, slots=True)
class PageTable:
    """The rows a tier sees (``rows``) and, on the zero-copy path, which rows hold page ``p``: ``first[i] + p * step[i]``.

    ``staged`` tells the copying path: then ``rows`` are staging rows of one whole page each
    and a page's row is lent per call (:class:`StagingRows`).
    """

    rows: torch.Tensor
    first: tuple[int, ...]
    step: tuple[int, ...]
    staged: bool

    @property
    def regions(self) -> int:
        """Tier keys per page: 1 or 2 in place, 1 when staged."""
        return len(self.first)

    @property
    def row_bytes(self) -> int:
        """Bytes of one row: the tier's block size."""
        return int(self.rows.shape[1])

    def page_rows(self, page: int) -> list[int]:
        """The rows of page ``page`` in place (zero-copy path only)."""
        return [first + page * step for first, step in zip(self.first, self.step)]


class StagingRows:
    """The copying path's staging slots (each the rows of one page), lent to a call and returned when their tier jobs report.

    A call takes what is free, up to what it needs, and moves its pages through them in rounds;
    with none free its pages are misses or failed sets, so a tier that is slow to report never
    makes SGLang wait for room.
    """

    def __init__(self, slots: Sequence[list[int]]) -> None:
        self._free = list(slots)
        self._lock = threading.Lock()

    def take(self, count: int) -> list[list[int]]:
        """The rows of up to ``count`` free slots (none if none is free)."""
        with self._lock:
            taken, self._free = self._free[:count], self._free[count:]
        return taken

    def give_back(self, slots: Sequence[list[int]]) -> None:
        """Return slots whose tier jobs have reported."""
        with self._lock:
            self._free.extend(slots)


def page_table(pool: HostPool, page_num: int, staging_pages: int) -> PageTable:
    """The zero-copy table of ``pool`` when its layout allows one, else ``staging_pages`` staging rows of one page each."""
    if pool.layout not in ZERO_COPY_LAYOUTS | COPYING_LAYOUTS:
        served = ", ".join(sorted(ZERO_COPY_LAYOUTS | COPYING_LAYOUTS))
        raise ValueError(
            f"kvcontract's HiCache backend: SGLang's {pool.layout!r} host layout has no page view for storage; "
            f"start SGLang with --hicache-mem-layout one of {served}"
        )
    buffer = pool.kv_buffer
    if pool.layout in UNIFIED_LAYOUTS and isinstance(buffer, torch.Tensor) and buffer.is_contiguous() and buffer.shape[0] >= page_num:
        return PageTable(buffer.view(torch.uint8).view(int(buffer.shape[0]), -1), (0,), (1,), staged=False)
    if pool.layout in ZERO_COPY_LAYOUTS and isinstance(buffer, torch.Tensor) and buffer.is_contiguous():
        table = _in_place(pool, buffer, page_num)
        if table is not None:
            return table
    if pool.layout in UNIFIED_LAYOUTS:
        raise ValueError(
            f"kvcontract's HiCache backend: this {pool.layout!r} host pool's buffer is not one page-major tensor, and SGLang "
            "gives that layout no page copy to stage it with; start SGLang with --hicache-mem-layout page_first"
        )
    page_bytes = pool.get_data_page(0, flat=True).numel() * pool.dtype.itemsize
    return PageTable(torch.zeros((staging_pages, page_bytes), dtype=torch.uint8), (0,), (0,), staged=True)


def _in_place(pool: HostPool, buffer: torch.Tensor, page_num: int) -> PageTable | None:
    """The pool's buffer as rows, if SGLang's metadata puts every page in 1 or 2 equal, row-aligned regions."""
    size = pool.page_size
    pointers, sizes = pool.get_page_buffer_meta(torch.arange(2 * size))
    regions = len(pointers) // 2
    if regions not in (1, 2) or len(set(sizes)) != 1:
        return None
    width = sizes[0]
    base, nbytes = buffer.data_ptr(), buffer.numel() * buffer.element_size()
    offsets = [pointer - base for pointer in pointers]
    if nbytes % width or any(offset % width or not 0 <= offset < nbytes for offset in offsets):
        return None
    first = tuple(offset // width for offset in offsets[:regions])
    step = tuple(offset // width - row for offset, row in zip(offsets[regions:], first))
    rows = buffer.view(torch.uint8).view(-1, width)
    last = [row + (page_num - 1) * stride for row, stride in zip(first, step)]
    if any(not 0 <= row < rows.shape[0] for row in last):
        return None
    return PageTable(rows, first, step, staged=False)
