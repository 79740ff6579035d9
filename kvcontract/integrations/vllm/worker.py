"""``KVContractOffloadingWorker``: kvcontract's transfer engine behind vLLM's ``OffloadingWorker``.

vLLM gives the worker its KV caches in canonical form: per unique tensor a
``(num_blocks, page_bytes)`` int8 view, and per KV-cache group the tensors its layers use.
kvcontract's worker takes per-group lists of tensors with blocks on dim 0, so the canonical
views are what it copies, bytes as they are: the right call, since vLLM already resolved
every attention backend's layout (K/V order, heads, padding) into those pages.

The GPU side of a job comes in vLLM's convention of the release: 0.33 passes a
``GPULoadStoreSpec`` of numpy block ids, 0.34 the ``DevicePointers`` its connector resolved
from one. Either becomes the contract's ``GPULoadStoreSpec`` here, once per job; pointers
are proven block starts of the caches the worker was built with first
(:mod:`~kvcontract.integrations.vllm.device_pointers`), and a job whose pointers are not is
reported failed on the next ``get_finished`` without copying anything. The host side is the
kvcontract manager's own spec, carried through vLLM's metadata in
:class:`~kvcontract.integrations.vllm.host_spec.KVContractHostSpec`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from typing_extensions import override
from vllm.v1.kv_offload.base import CanonicalKVCaches
from vllm.v1.kv_offload.base import GPULoadStoreSpec as VLLMGPULoadStoreSpec
from vllm.v1.kv_offload.base import LoadStoreSpec as VLLMLoadStoreSpec
from vllm.v1.kv_offload.base import OffloadingWorker as VLLMOffloadingWorker
from vllm.v1.kv_offload.base import TransferResult as VLLMTransferResult

from kvcontract.contracts import GPULoadStoreSpec, LoadStoreSpec, OffloadingWorker
from kvcontract.integrations.vllm.device_pointers import DevicePointerMap, InvalidDevicePointers
from kvcontract.integrations.vllm.host_spec import KVContractHostSpec

if TYPE_CHECKING:  # vLLM 0.34 only; the gate type-checks against the newest release
    from vllm.v1.kv_offload.base import DevicePointers

__all__ = ["KVContractOffloadingWorker", "group_tensors"]

_log = logging.getLogger(__name__)


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
    blocks hold ``blocks_per_offload_block`` GPU blocks, vLLM's ``blocks_per_chunk``) over the
    canonical ``kv_caches`` vLLM registered.

    A failed kvcontract job, or one whose device pointers are refused, is reported failed,
    never done: vLLM 0.34 then drops a failed store and ends or recomputes a failed load's
    request (``kv_load_failure_policy``); vLLM 0.33's connector asserts success instead.
    """

    def __init__(
        self, inner: OffloadingWorker, kv_caches: CanonicalKVCaches, *, blocks_per_offload_block: int = 1
    ) -> None:
        self._inner = inner
        self._pointers = DevicePointerMap(kv_caches)
        self._blocks_per_offload_block = blocks_per_offload_block
        self._refused: list[VLLMTransferResult] = []

    @property
    def inner(self) -> OffloadingWorker:
        """The kvcontract worker this adapter drives."""
        return self._inner

    def _device_side(self, job_id: int, device: VLLMGPULoadStoreSpec | DevicePointers) -> GPULoadStoreSpec | None:
        """The contract's GPU side of a job, or ``None`` (the job refused, to be reported failed)."""
        if isinstance(device, VLLMGPULoadStoreSpec):
            return _gpu_spec(device, self._blocks_per_offload_block)
        try:
            return self._pointers.gpu_spec(device, self._blocks_per_offload_block)
        except InvalidDevicePointers as error:
            _log.warning("kvcontract: transfer job %d refused, nothing copied: %s", job_id, error)
            self._refused.append(VLLMTransferResult(job_id, False, 0))
            return None

    @override
    def submit_store(
        self, job_id: int, device_ptrs: VLLMGPULoadStoreSpec | DevicePointers, dst_spec: VLLMLoadStoreSpec
    ) -> bool:
        source = self._device_side(job_id, device_ptrs)
        return source is None or self._inner.submit_store(job_id, source, _host_spec(dst_spec))

    @override
    def submit_load(
        self,
        job_id: int,
        src_spec: VLLMLoadStoreSpec,
        device_ptrs: VLLMGPULoadStoreSpec | DevicePointers,
        expedited: bool = False,
    ) -> bool:
        target = self._device_side(job_id, device_ptrs)
        return target is None or self._inner.submit_load(job_id, _host_spec(src_spec), target)

    @override
    def get_finished(self) -> list[VLLMTransferResult]:
        refused, self._refused = self._refused, []
        return refused + [
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
