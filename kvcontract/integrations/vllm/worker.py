"""``KVContractOffloadingWorker``: kvcontract's transfer engine behind vLLM's ``OffloadingWorker``.

vLLM gives the worker its KV caches in canonical form: per unique tensor a
``(num_blocks, page_bytes)`` int8 view, and per KV-cache group the tensors its layers use.
kvcontract's worker takes per-group lists of tensors with blocks on dim 0, so the canonical
views are what it copies, bytes as they are: the right call, since vLLM already resolved
every attention backend's layout (K/V order, heads, padding) into those pages.

vLLM's GPU spec holds numpy block ids; they become the contract's ``GPULoadStoreSpec``
here, once per job. The host side is the kvcontract manager's own spec, carried through
vLLM's metadata in :class:`~kvcontract.integrations.vllm.host_spec.KVContractHostSpec`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from typing_extensions import override
from vllm.v1.kv_offload.base import CanonicalKVCaches
from vllm.v1.kv_offload.base import GPULoadStoreSpec as VLLMGPULoadStoreSpec
from vllm.v1.kv_offload.base import LoadStoreSpec as VLLMLoadStoreSpec
from vllm.v1.kv_offload.base import OffloadingWorker as VLLMOffloadingWorker
from vllm.v1.kv_offload.base import TransferResult as VLLMTransferResult

from kvcontract.contracts import GPULoadStoreSpec, LoadStoreSpec, OffloadingWorker
from kvcontract.integrations.vllm.host_spec import KVContractHostSpec

__all__ = ["KVContractOffloadingWorker", "group_tensors"]


def group_tensors(kv_caches: CanonicalKVCaches) -> list[list[torch.Tensor]]:
    """Per KV-cache group, the canonical block tensors its layers use, each once, in layer order."""
    groups: list[list[torch.Tensor]] = []
    for refs in kv_caches.group_data_refs:
        indices = dict.fromkeys(ref.tensor_idx for ref in refs)
        groups.append([kv_caches.tensors[index].tensor for index in indices])
    return groups


def _gpu_spec(spec: VLLMGPULoadStoreSpec, blocks_per_offload_block: int) -> GPULoadStoreSpec:
    """vLLM's ``block_indices`` count GPU blocks from the request's start; the contract's count
    them inside the group's first offload block, hence the remainder."""
    ids: list[int] = spec.block_ids.tolist()
    starts = tuple(index % blocks_per_offload_block for index in spec.block_indices)
    return GPULoadStoreSpec(ids, tuple(spec.group_sizes), starts)


def _host_spec(spec: VLLMLoadStoreSpec) -> LoadStoreSpec:
    if not isinstance(spec, KVContractHostSpec):
        raise TypeError(
            f"KVContractOffloadingWorker moves blocks that a kvcontract manager planned, got a "
            f"{type(spec).__name__}: use KVContractOffloadingSpec on the scheduler side as well"
        )
    return spec.spec


class KVContractOffloadingWorker(VLLMOffloadingWorker):
    """vLLM's worker-side transfer runner, backed by the kvcontract worker ``inner`` (whose offload
    blocks hold ``blocks_per_offload_block`` GPU blocks, vLLM's ``blocks_per_chunk``).

    vLLM 0.33's connector does not handle failed jobs (it asserts success); a failed
    kvcontract job is reported to it as failed all the same, never as done.
    """

    def __init__(self, inner: OffloadingWorker, *, blocks_per_offload_block: int = 1) -> None:
        self._inner = inner
        self._blocks_per_offload_block = blocks_per_offload_block

    @property
    def inner(self) -> OffloadingWorker:
        """The kvcontract worker this adapter drives."""
        return self._inner

    @override
    def submit_store(self, job_id: int, src_spec: VLLMGPULoadStoreSpec, dst_spec: VLLMLoadStoreSpec) -> bool:
        return self._inner.submit_store(job_id, _gpu_spec(src_spec, self._blocks_per_offload_block), _host_spec(dst_spec))

    @override
    def submit_load(
        self,
        job_id: int,
        src_spec: VLLMLoadStoreSpec,
        dst_spec: VLLMGPULoadStoreSpec,
        expedited: bool = False,
    ) -> bool:
        return self._inner.submit_load(job_id, _host_spec(src_spec), _gpu_spec(dst_spec, self._blocks_per_offload_block))

    @override
    def get_finished(self) -> list[VLLMTransferResult]:
        return [
            VLLMTransferResult(result.job_id, result.success, result.transfer_bytes, result.transfer_seconds)
            for result in self._inner.get_finished()
        ]

    @override
    def wait(self, job_ids: set[int]) -> None:
        self._inner.wait(job_ids)

    @override
    def shutdown(self) -> None:
        self._inner.shutdown()


def worker_tensors(kv_caches: CanonicalKVCaches) -> Sequence[torch.Tensor] | list[list[torch.Tensor]]:
    """What kvcontract's worker takes: one group's tensor list, or a list per group."""
    groups = group_tensors(kv_caches)
    return groups[0] if len(groups) == 1 else groups
