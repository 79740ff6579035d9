"""The engine's KV-cache tensors seen as rows of bytes, one row per GPU block.

Engines keep one tensor per layer, blocks on dim 0 (``(num_blocks, ...)``) or, with K
and V apart, on dim 1 (``(2, num_blocks, ...)``). Whatever the dtype, each block of
each tensor is a contiguous run of bytes; the copy engines move those runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import cast

import torch

__all__ = ["BlockPlane", "KVCacheGroup", "KVCacheLayout"]

_SUPPORTED_DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class BlockPlane:
    """One tensor's blocks as a ``(num_blocks, block_bytes)`` uint8 view (rows may be padded)."""

    rows: torch.Tensor

    @property
    def num_blocks(self) -> int:
        """How many blocks the tensor holds."""
        return self.rows.shape[0]

    @property
    def block_bytes(self) -> int:
        """Bytes of one block in this tensor."""
        return self.rows.shape[1]

    @property
    def row_stride(self) -> int:
        """Bytes from one block to the next in memory."""
        return self.rows.stride(0)

    @classmethod
    def of(cls, blocks: torch.Tensor, where: str) -> BlockPlane:
        """View ``blocks`` (blocks on dim 0, any dtype) as bytes; ``where`` names it in errors."""
        if blocks.dim() < 1:
            raise ValueError(f"{where} is a scalar: a KV-cache tensor needs a block dimension")
        num_blocks = blocks.shape[0]
        item = blocks.element_size()
        block_bytes = math.prod(blocks.shape[1:]) * item
        if num_blocks == 0 or block_bytes == 0:
            raise ValueError(f"{where} has shape {tuple(blocks.shape)}: it holds no block bytes")
        if not blocks[0].is_contiguous():
            raise ValueError(
                f"{where} has strides {blocks.stride()} for shape {tuple(blocks.shape)}: the "
                "elements of one block must be contiguous (only the block dimension may be padded)"
            )
        row_stride = blocks.stride(0) * item
        if num_blocks > 1 and row_stride < block_bytes:
            raise ValueError(
                f"{where}: blocks of {block_bytes} bytes are {row_stride} bytes apart, so they "
                "overlap; pass a tensor whose blocks do not share memory"
            )
        rows = torch.empty(0, dtype=torch.uint8, device=blocks.device)
        rows.set_(
            blocks.untyped_storage(),
            blocks.storage_offset() * item,
            (num_blocks, block_bytes),
            (row_stride, 1),
        )
        return cls(rows)


@dataclass(frozen=True)
class KVCacheGroup:
    """The tensors of one KV-cache group: a GPU block of the group spans one row of each.

    In host memory a GPU block of the group is ``bytes_per_block`` bytes: the rows of
    its planes one after the other, plane ``p`` at ``offsets[p]``.
    """

    planes: tuple[BlockPlane, ...]

    @cached_property
    def num_blocks(self) -> int:
        """GPU blocks in the group."""
        return self.planes[0].num_blocks

    @cached_property
    def offsets(self) -> tuple[int, ...]:
        """Byte offset of each plane's row inside the group's host row."""
        return tuple(sum(p.block_bytes for p in self.planes[:i]) for i in range(len(self.planes)))

    @cached_property
    def bytes_per_block(self) -> int:
        """Bytes of one GPU block of the group, all planes together."""
        return sum(p.block_bytes for p in self.planes)


@dataclass(frozen=True)
class KVCacheLayout:
    """Every KV-cache group of the engine, on one device.

    A host (offload) block holds ``blocks_per_offload_block`` GPU blocks of one group;
    GPU block ``j`` of it sits at ``j * bytes_per_gpu_block``, so the whole host buffer
    reads as rows of ``bytes_per_gpu_block`` bytes, row ``host_block * k + j``. A group
    with smaller blocks uses the first ``group.bytes_per_block`` bytes of each row.
    """

    groups: tuple[KVCacheGroup, ...]
    blocks_per_offload_block: int

    @property
    def device(self) -> torch.device:
        """The device every KV-cache tensor lives on."""
        return self.groups[0].planes[0].rows.device

    @property
    def bytes_per_gpu_block(self) -> int:
        """Bytes of one GPU block in host memory: the largest group's block."""
        return max(group.bytes_per_block for group in self.groups)

    @property
    def bytes_per_offload_block(self) -> int:
        """Bytes of one host (offload) block."""
        return self.blocks_per_offload_block * self.bytes_per_gpu_block

    @classmethod
    def of(
        cls,
        kv_caches: Sequence[torch.Tensor] | Sequence[Sequence[torch.Tensor]],
        *,
        kv_first: bool = False,
        blocks_per_offload_block: int = 1,
    ) -> KVCacheLayout:
        """Register ``kv_caches``: per-layer tensors of one group, or a sequence of groups.

        With ``kv_first`` each tensor is ``(2, num_blocks, ...)``: K and V are two planes.
        """
        if blocks_per_offload_block < 1:
            raise ValueError(f"blocks_per_offload_block must be at least 1, got {blocks_per_offload_block}")
        entries = _items(
            kv_caches,
            "kv_caches must be a list of per-layer tensors (or a list of such lists, one per KV-cache group)",
        )
        if not entries:
            raise ValueError("kv_caches is empty: register at least one KV-cache tensor")
        one_group = all(isinstance(entry, torch.Tensor) for entry in entries)
        grouped = (
            [entries]
            if one_group
            else [
                _items(
                    entry,
                    f"kv_caches[{g}] must be a list of tensors: give either tensors only (one group) "
                    "or lists of tensors only (one list per KV-cache group)",
                )
                for g, entry in enumerate(entries)
            ]
        )
        groups = tuple(_group(tensors, g, kv_first=kv_first) for g, tensors in enumerate(grouped))
        devices = {plane.rows.device for group in groups for plane in group.planes}
        if len(devices) > 1:
            raise ValueError(
                f"KV-cache tensors are on several devices {sorted(map(str, devices))}: one worker serves one device"
            )
        layout = cls(groups, blocks_per_offload_block)
        if layout.device.type not in _SUPPORTED_DEVICES:
            raise ValueError(
                f"KV-cache tensors are on {layout.device}; supported devices are {', '.join(_SUPPORTED_DEVICES)}"
            )
        return layout


def _items(value: object, expected: str) -> Sequence[object]:
    """``value`` as a sequence, or a ``TypeError`` saying what was ``expected``."""
    if isinstance(value, (torch.Tensor, str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{expected}, got {type(value).__name__}")
    # isinstance() cannot tell the element type; the caller checks each element.
    return cast("Sequence[object]", value)


def _group(tensors: Sequence[object], index: int, *, kv_first: bool) -> KVCacheGroup:
    if not tensors:
        raise ValueError(f"KV-cache group {index} has no tensors: give each group its layers")
    planes: list[BlockPlane] = []
    for layer, tensor in enumerate(tensors):
        where = f"KV-cache group {index}, tensor {layer}"
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{where} is a {type(tensor).__name__}, not a torch.Tensor")
        if kv_first:
            if tensor.dim() < 2 or tensor.shape[0] != 2:
                raise ValueError(
                    f"{where} has shape {tuple(tensor.shape)}; with kv_first=True each tensor "
                    "is (2, num_blocks, ...): K and V first, blocks on dim 1"
                )
            planes.append(BlockPlane.of(tensor[0], f"{where} (K)"))
            planes.append(BlockPlane.of(tensor[1], f"{where} (V)"))
        else:
            planes.append(BlockPlane.of(tensor, where))
    sizes = {plane.num_blocks for plane in planes}
    if len(sizes) > 1:
        raise ValueError(
            f"KV-cache group {index} mixes tensors of {sorted(sizes)} blocks: the tensors of "
            "one group hold the same blocks"
        )
    return KVCacheGroup(tuple(planes))
