"""vLLM 0.34's ``DevicePointers`` back to GPU block ids, proven against the worker's own KV caches.

From 0.34 vLLM's connector resolves a job's GPU side to raw addresses before the worker
sees it (``resolve_device_pointers``: per group, per layer reference, per block, an address
and a size). kvcontract's worker copies by block id, so each address is mapped back: it
must be the start of a block of the tensor that reference names, in the caches the worker
was built with, and its size that reference's page. Every layer reference of a group must
name the same blocks, since the worker copies a group's tensors block by block together.
An address that is not is refused before a byte moves: the worker never copies from or to
an address it did not prove.

Hot path: once per job, a few numpy calls per group over all its blocks at once (no Python
loop per block); measured by ``tools/bench_vllm_adapter.py --pointers`` (figures in docs/vllm.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from vllm.v1.kv_offload.base import CanonicalKVCaches

from kvcontract.contracts import GPULoadStoreSpec

if TYPE_CHECKING:  # vLLM 0.34 only; the gate type-checks against the newest release
    from vllm.v1.kv_offload.base import DevicePointers

__all__ = ["DevicePointerMap", "InvalidDevicePointers"]


class InvalidDevicePointers(ValueError):
    """A job's device pointers are not block starts of the worker's KV caches; the job must fail."""


@dataclass(frozen=True)
class _Group:
    """Per layer reference of one KV-cache group: its tensor's base address, block stride and page size."""

    bases: npt.NDArray[np.uint64]
    strides: npt.NDArray[np.uint64]
    page_bytes: npt.NDArray[np.uint64]
    num_blocks: int


class DevicePointerMap:
    """The block starts of vLLM's canonical KV caches, to turn a job's pointers into block ids."""

    def __init__(self, kv_caches: CanonicalKVCaches) -> None:
        groups: list[_Group] = []
        for refs in kv_caches.group_data_refs:
            tensors = [kv_caches.tensors[ref.tensor_idx].tensor for ref in refs]
            groups.append(
                _Group(
                    bases=np.array([tensor.data_ptr() for tensor in tensors], dtype=np.uint64),
                    strides=np.array([tensor.stride(0) * tensor.element_size() for tensor in tensors], dtype=np.uint64),
                    page_bytes=np.array([ref.page_size_bytes for ref in refs], dtype=np.uint64),
                    num_blocks=min((tensor.shape[0] for tensor in tensors), default=0),
                )
            )
        self._groups = tuple(groups)

    def gpu_spec(self, pointers: DevicePointers, blocks_per_offload_block: int) -> GPULoadStoreSpec:
        """The contract's GPU side of the job ``pointers`` describe; raises :class:`InvalidDevicePointers` saying why."""
        counts, refs = pointers.group_block_counts, pointers.group_data_ref_counts
        if (
            len(counts) != len(self._groups)
            or len(refs) != len(self._groups)
            or len(pointers.block_indices) != len(counts)
        ):
            raise InvalidDevicePointers(
                f"{len(counts)} groups of pointers, the worker's KV caches have {len(self._groups)}"
            )
        total = sum(count * len(group.bases) for count, group in zip(counts, self._groups))
        if (
            tuple(refs) != tuple(len(group.bases) for group in self._groups)
            or len(pointers.ptrs) != total
            or len(pointers.sizes) != total
        ):
            raise InvalidDevicePointers("the pointers' layer references per group do not match the worker's KV caches")
        ids: list[int] = []
        offset = 0
        for number, (count, group) in enumerate(zip(counts, self._groups)):
            if count == 0:
                continue
            end = offset + count * len(group.bases)
            ids.extend(self._block_ids(number, group, pointers.ptrs[offset:end], pointers.sizes[offset:end], count))
            offset = end
        starts = tuple(index % blocks_per_offload_block for index in pointers.block_indices)
        return GPULoadStoreSpec(ids, tuple(counts), starts)

    @staticmethod
    def _block_ids(
        number: int, group: _Group, ptrs: npt.NDArray[np.uint64], sizes: npt.NDArray[np.uint64], count: int
    ) -> list[int]:
        """The block ids one group's pointers name (layer reference by layer reference, ``count`` blocks each);
        every layer reference must name the same, whole pages."""
        # Unsigned: an address below the base wraps far past the last block, so one bound check covers
        # both sides. An address inside a page floors to its block, whose start then differs from it, so
        # the comparison with every reference's block starts proves whole pages too (no modulo pass).
        blocks = (ptrs[:count] - group.bases[0]) // group.strides[0]
        # The lengths were checked by the caller, so plain comparisons suffice (np.array_equal costs 2 µs more each).
        if not (
            int(blocks.max()) < group.num_blocks
            and bool((ptrs == (group.bases[:, None] + blocks[None, :] * group.strides[:, None]).ravel()).all())
        ):
            raise InvalidDevicePointers(
                f"group {number}: a pointer is not the start of a block of the worker's KV caches"
            )
        if not bool((sizes == np.repeat(group.page_bytes, count)).all()):
            raise InvalidDevicePointers(f"group {number}: a pointer's size is not its layer's page")
        block_ids: list[int] = blocks.tolist()
        return block_ids
