"""Which GPU block goes to which host row in one transfer job, checked against the layout.

A host (offload) block holds ``k`` GPU blocks of one group, so GPU block ``i`` of a group
whose transfer starts at index ``s`` inside its first offload block maps to host row
``host_ids[(s + i) // k] * k + (s + i) % k``. The groups take their host blocks from the
host spec in turn, ``ceil((s + n) / k)`` for a group of ``n`` GPU blocks (none for an
empty group). Host rows before ``s`` in the first offload block, and after the last GPU
block in the last one, are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kvcontract.contracts import GPULoadStoreSpec
from kvcontract.contracts.specs import check_integers
from kvcontract.transfer.layout import KVCacheLayout

__all__ = ["BlockMapping", "GroupMapping"]


@dataclass(frozen=True)
class GroupMapping:
    """GPU block ``gpu_ids[i]`` of group ``group`` pairs with host row ``host_rows[i]``."""

    group: int
    gpu_ids: npt.NDArray[np.int64]
    host_rows: npt.NDArray[np.int64]


@dataclass(frozen=True)
class BlockMapping:
    """The block pairs of one job, for its non-empty groups, and the bytes it moves."""

    groups: tuple[GroupMapping, ...]
    nbytes: int

    @classmethod
    def of(
        cls,
        layout: KVCacheLayout,
        gpu: GPULoadStoreSpec,
        host_block_ids: Sequence[int],
        *,
        num_host_blocks: int,
        to_gpu: bool,
    ) -> BlockMapping:
        """Pair ``gpu``'s blocks with host blocks ``host_block_ids``, or raise naming the problem.

        ``to_gpu`` says the GPU blocks are written (a load): they must then be distinct;
        for a store the host blocks must be.
        """
        k = layout.blocks_per_offload_block
        if len(gpu.group_sizes) != len(layout.groups):
            raise ValueError(
                f"the GPU spec has {len(gpu.group_sizes)} KV-cache groups, the worker registered "
                f"{len(layout.groups)}: give group_sizes one entry per registered group"
            )
        for g, start in enumerate(gpu.block_indices):
            if not 0 <= start < k:
                raise ValueError(
                    f"block_indices[{g}] = {start} is outside an offload block of {k} GPU blocks: "
                    f"give a value in [0, {k})"
                )
        gpu_ids = _ids(gpu.block_ids, "GPULoadStoreSpec.block_ids")
        host_ids = _ids(host_block_ids, "BlockIdsSpec.block_ids")
        needed = [-(-(start + size) // k) if size else 0 for size, start in zip(gpu.group_sizes, gpu.block_indices)]
        if sum(needed) != host_ids.size:
            raise ValueError(
                f"{host_ids.size} host blocks given, but group_sizes {list(gpu.group_sizes)} "
                f"starting at block_indices {list(gpu.block_indices)} with {k} GPU blocks per "
                f"offload block need {sum(needed)} ({needed} per group)"
            )
        _check_range(host_ids, num_host_blocks, "host block id")
        if not to_gpu and _has_repeats(host_ids):
            raise ValueError(f"a store writes host blocks {host_ids.tolist()} more than once: give distinct ids")
        groups: list[GroupMapping] = []
        gpu_at = host_at = 0
        for g, (size, start, count) in enumerate(zip(gpu.group_sizes, gpu.block_indices, needed)):
            if size:
                ids = gpu_ids[gpu_at : gpu_at + size]
                _check_range(ids, layout.groups[g].num_blocks, f"GPU block id of group {g}")
                if to_gpu and _has_repeats(ids):
                    raise ValueError(
                        f"a load writes GPU blocks {ids.tolist()} of group {g} more than once: give distinct ids"
                    )
                hosts = host_ids[host_at : host_at + count]
                rows = hosts if k == 1 else (hosts[:, None] * k + np.arange(k)).ravel()
                groups.append(GroupMapping(g, ids, rows[start : start + size]))
            gpu_at += size
            host_at += count
        nbytes = sum(m.gpu_ids.size * layout.groups[m.group].bytes_per_block for m in groups)
        return cls(tuple(groups), nbytes)


def _ids(values: Sequence[int], name: str) -> npt.NDArray[np.int64]:
    """``values`` as an array, once they proved to be integers (the range is checked later)."""
    check_integers(values, name, nonnegative=False)
    try:
        return np.asarray(values, dtype=np.int64)
    except OverflowError:
        raise ValueError(f"{name} holds an id beyond 64 bits: valid ids are block numbers") from None


def _has_repeats(ids: npt.NDArray[np.int64]) -> bool:
    ordered = np.sort(ids)
    return bool((ordered[1:] == ordered[:-1]).any())


def _check_range(ids: npt.NDArray[np.int64], limit: int, what: str) -> None:
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= limit):
        bad = ids[(ids < 0) | (ids >= limit)]
        raise ValueError(f"{what} {int(bad[0])} is out of range: valid ids are 0 to {limit - 1}")
