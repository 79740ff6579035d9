"""Where a page of SGLang's host pool lies for a kvcontract tier: rows of the pool itself, or staging rows.

kvcontract's tiers move whole rows of a ``(blocks, bytes)`` uint8 table. On ``page_unified``
(one run of bytes per page, page-major) the pool's buffer is that table with page ``p`` at row
``p``. On SGLang's page-first layouts (``page_first``, ``page_first_direct``, ``page_head``) the
pool's one buffer viewed as bytes is such a table without a copy too: SGLang's own zero-copy metadata
(``get_page_buffer_meta``) puts each page in one region (MLA) or two (K at row ``p``, V at row
``page_num + p``) of equal size, and the tier reads and writes those rows in place, a key per
region. Other layouts take the copying path, one key per page, through staging rows of the
backend's own: ``layer_first`` (a page scattered over every layer) is gathered with SGLang's
``get_data_page`` and scattered back with ``set_from_flat_data_page``; ``page_first_kv_split``
(Ascend's MLA layout: K, V and the indexer's rows in separate page-major buffers of unequal row
sizes, and no page copy in SGLang) is gathered from and scattered to the regions SGLang's own
metadata names, each page of each buffer one run of bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

__all__ = ["HostPool", "PageTable", "SplitPages", "StagingRows", "page_table"]

ZERO_COPY_LAYOUTS = frozenset({"page_first", "page_first_direct", "page_head", "page_unified"})
UNIFIED_LAYOUTS = frozenset({"page_unified"})
"""Layouts whose buffer is page-major with a page's bytes in one run: page ``p`` is row ``p`` (SGLang gives them no page metadata)."""
SPLIT_LAYOUTS = frozenset({"page_first_kv_split"})
"""Layouts whose page lies in several page-major buffers, as many regions as SGLang's metadata lists (K, V unless FP8 DSA packs it into K, indexer K and scales)."""
COPYING_LAYOUTS = frozenset({"layer_first"}) | SPLIT_LAYOUTS
_BUFFERS = ("kv_buffer", "index_k_with_scale_buffer")
"""Where SGLang's host pools keep their one buffer: the KV pools' (and Mamba's list of states), the DSA indexer's."""
_SPLIT_BUFFERS = ("k_buffer", "v_buffer", "index_k_buffer", "index_k_scale_buffer")


class HostPool(Protocol):
    """What the backend reads of SGLang's ``HostKVCache``: its geometry, its buffer and its page copies."""

    layout: str
    page_size: int
    dtype: torch.dtype

    def get_page_buffer_meta(self, indices: torch.Tensor) -> tuple[list[int], list[int]]: ...

    def get_data_page(self, index: int, flat: bool = True) -> torch.Tensor: ...

    def set_from_flat_data_page(self, index: int, data_page: torch.Tensor) -> None: ...


@dataclass(frozen=True, slots=True)
class SplitPages:
    """A split layout's pages: one ``(pages, bytes)`` byte view per region of a page, in the order SGLang's metadata lists them."""

    regions: tuple[torch.Tensor, ...]

    @property
    def page_bytes(self) -> int:
        """Bytes of one page: its regions end to end."""
        return sum(int(region.shape[1]) for region in self.regions)

    def gather(self, page: int) -> torch.Tensor:
        """Page ``page`` as flat bytes (a copy), its regions end to end."""
        return torch.cat([region[page] for region in self.regions])

    def scatter(self, page: int, data: torch.Tensor) -> None:
        """Flat bytes ``data`` into page ``page``, the way :meth:`gather` reads it."""
        start = 0
        for region in self.regions:
            width = int(region.shape[1])
            region[page] = data[start : start + width]
            start += width


@dataclass(frozen=True, slots=True)
class PageTable:
    """The rows a tier sees (``rows``) and, on the zero-copy path, which rows hold page ``p``: ``first[i] + p * step[i]``.

    ``staged`` tells the copying path: then ``rows`` are staging rows of one whole page each
    and a page's row is lent per call (:class:`StagingRows`); ``split`` is how a split layout's
    page is gathered and scattered (``None``: through SGLang's own page view).
    """

    rows: torch.Tensor
    first: tuple[int, ...]
    step: tuple[int, ...]
    staged: bool
    split: SplitPages | None = None

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


def page_table(pool: HostPool, page_num: int, staging_pages: int, *, zero_copy: bool = True) -> PageTable:
    """The zero-copy table of ``pool`` when its layout allows one (and ``zero_copy``), else ``staging_pages`` staging rows of one page each."""
    if pool.layout not in ZERO_COPY_LAYOUTS | COPYING_LAYOUTS:
        served = ", ".join(sorted(ZERO_COPY_LAYOUTS | COPYING_LAYOUTS))
        raise ValueError(
            f"kvcontract's HiCache backend: SGLang's {pool.layout!r} host layout has no page view for storage; "
            f"start SGLang with --hicache-mem-layout one of {served}"
        )
    buffer = next((found for name in _BUFFERS if (found := getattr(pool, name, None)) is not None), None)
    if (
        zero_copy
        and pool.layout in UNIFIED_LAYOUTS
        and isinstance(buffer, torch.Tensor)
        and buffer.is_contiguous()
        and buffer.shape[0] >= page_num
    ):
        return PageTable(buffer.view(torch.uint8).view(int(buffer.shape[0]), -1), (0,), (1,), staged=False)
    if zero_copy and pool.layout in ZERO_COPY_LAYOUTS and isinstance(buffer, torch.Tensor) and buffer.is_contiguous():
        table = _in_place(pool, buffer, page_num)
        if table is not None:
            return table
    if pool.layout in SPLIT_LAYOUTS:
        try:
            split = _split_pages(pool, page_num)
        except NotImplementedError as error:  # SGLang's own refusal: split buffers under decode context parallelism
            raise ValueError(
                f"kvcontract's HiCache backend: SGLang gives this {pool.layout!r} host pool no page metadata ({error}); "
                "run SGLang without decode context parallelism to use a storage backend on this layout"
            ) from error
        if split is None:
            raise ValueError(
                f"kvcontract's HiCache backend: SGLang's page metadata of this {pool.layout!r} host pool does not put each "
                "region of a page in one run of bytes of one of the pool's buffers, so there is no page to copy; "
                f"this backend serves the layout as SGLang 0.5.23 lays it out"
            )
        return PageTable(
            torch.zeros((staging_pages, split.page_bytes), dtype=torch.uint8), (0,), (0,), staged=True, split=split
        )
    if pool.layout in UNIFIED_LAYOUTS:
        raise ValueError(
            f"kvcontract's HiCache backend: this {pool.layout!r} host pool's buffer is not one page-major tensor, and SGLang "
            "gives that layout no page copy to stage it with; start SGLang with --hicache-mem-layout page_first"
        )
    page = pool.get_data_page(0, flat=True)  # its own dtype: a Mamba pool's page is bytes, whatever its state's dtype
    page_bytes = page.numel() * page.element_size()
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


def _split_pages(pool: HostPool, page_num: int) -> SplitPages | None:
    """A split pool's regions, if SGLang's metadata puts each page's region ``i`` at page ``p`` of one page-major buffer, one run per page."""
    pointers, sizes = pool.get_page_buffer_meta(torch.arange(2 * pool.page_size))
    count = len(pointers) // 2
    buffers = [
        buffer for buffer in (getattr(pool, name, None) for name in _SPLIT_BUFFERS) if isinstance(buffer, torch.Tensor)
    ]
    regions: list[torch.Tensor] = []
    for pointer, following, size in zip(pointers[:count], pointers[count:], sizes[:count]):
        found = [
            buffer
            for buffer in buffers
            if buffer.data_ptr() == pointer
            and buffer.is_contiguous()
            and int(buffer.shape[0]) >= page_num
            and buffer.numel() * buffer.element_size() == size * int(buffer.shape[0])
            and following == pointer + size
        ]
        if not found:
            return None
        regions.append(found[0].view(torch.uint8).view(int(found[0].shape[0]), -1))
    return SplitPages(tuple(regions)) if regions else None
