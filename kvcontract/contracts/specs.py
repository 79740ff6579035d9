"""Where blocks are loaded from or stored to: the specs a manager hands to a worker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

__all__ = ["BlockIdsSpec", "GPULoadStoreSpec", "LoadStoreSpec"]


@dataclass(frozen=True, slots=True)
class LoadStoreSpec:
    """Base of every spec; ``medium`` names the memory it addresses (``"CPU"``, ``"GPU"``...)."""

    medium: ClassVar[str] = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class BlockIdsSpec(LoadStoreSpec):
    """Blocks of a block pool, by id, one per offload key and in key order."""

    medium: ClassVar[str] = "CPU"
    block_ids: Sequence[int]


@dataclass(frozen=True, slots=True)
class GPULoadStoreSpec(LoadStoreSpec):
    """GPU blocks of one transfer, for every KV-cache group in turn.

    ``block_ids`` concatenates the GPU block ids of all groups; ``group_sizes[g]`` says
    how many belong to group ``g``. An offload block may span several GPU blocks;
    ``block_indices[g]`` is the index, inside group ``g``'s first offload block, of its
    first GPU block (non-zero when a transfer starts at an unaligned GPU block).
    """

    medium: ClassVar[str] = "GPU"
    block_ids: Sequence[int]
    group_sizes: Sequence[int] = ()
    block_indices: Sequence[int] = ()

    def __post_init__(self) -> None:
        if not self.group_sizes:
            object.__setattr__(self, "group_sizes", (len(self.block_ids),))
        if not self.block_indices:
            object.__setattr__(self, "block_indices", (0,) * len(self.group_sizes))
        if sum(self.group_sizes) != len(self.block_ids):
            raise ValueError(
                f"group_sizes {list(self.group_sizes)} add up to {sum(self.group_sizes)}, "
                f"but there are {len(self.block_ids)} block_ids"
            )
        if len(self.block_indices) != len(self.group_sizes):
            raise ValueError(
                f"block_indices has {len(self.block_indices)} entries, "
                f"group_sizes {len(self.group_sizes)}: give one per KV-cache group"
            )
