"""Where blocks are loaded from or stored to: the specs a manager hands to a worker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["BlockIdsSpec", "GPULoadStoreSpec", "LoadStoreSpec"]


@dataclass(frozen=True, slots=True)
class LoadStoreSpec:
    """Base of every spec; ``medium`` names the memory it addresses (``"CPU"``, ``"GPU"``...)."""

    medium: ClassVar[str] = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class BlockIdsSpec(LoadStoreSpec):
    """Blocks of a block pool, by id, one per offload key and in key order.

    Managers build these on the hot path from ids they allocated, so construction checks
    nothing; whoever addresses memory with the ids (a worker's submit, a ``TierJob``) does.
    """

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
        check_integers(self.group_sizes, "GPULoadStoreSpec.group_sizes")
        check_integers(self.block_indices, "GPULoadStoreSpec.block_indices")
        if len(self.group_sizes) == 0:
            object.__setattr__(self, "group_sizes", (len(self.block_ids),))
        if len(self.block_indices) == 0:
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


_INTEGER_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


def check_integers(values: Sequence[int], field: str, *, nonnegative: bool = True) -> None:
    """Raise ``ValueError`` naming ``field`` unless ``values`` are integers (non-negative ones
    by default): ``int``, numpy integer scalars, or a flat numpy array or torch tensor of an
    integer dtype, checked by its dtype in one step.

    Ids and sizes address memory, so a float, bool or string is refused rather than rounded
    or coerced into some other block. Boundaries (spec and job construction, a worker's
    submit) call this once; the code behind them trusts the values.
    """
    expected = f"{field} must be a flat sequence of integers"
    dtype: object = getattr(values, "dtype", None)
    if dtype is not None:
        array: Any = values  # a numpy array or torch tensor: both have ndim, len and min()
        if str(dtype).removeprefix("torch.") not in _INTEGER_DTYPES:
            raise ValueError(f"{expected}, got an array of {dtype}")
        if array.ndim != 1:
            raise ValueError(f"{expected}, got shape {tuple(array.shape)}")
        if nonnegative and len(array) and bool(array.min() < 0):
            raise ValueError(f"{field} holds {int(array.min())}: give values of 0 or more")
        return
    for kind in set(map(type, values)):
        if kind is not int and not _is_integer_type(kind):
            example = next(value for value in values if type(value) is kind)
            raise ValueError(
                f"{expected}, got {kind.__name__} {example!r}: ids and sizes are never rounded "
                "or converted; pass int (or numpy/torch integers)"
            )
    if nonnegative and values and min(values) < 0:
        raise ValueError(f"{field} holds {min(values)}: give values of 0 or more")


def _is_integer_type(kind: type[object]) -> bool:
    """Whether ``kind`` is an integer type: ``int`` and its subclasses but ``bool``, or a numpy integer scalar."""
    if issubclass(kind, int):
        return kind is not bool
    return kind.__module__ == "numpy" and hasattr(kind, "__index__")
