"""``TorchOffloadingWorker``: the ``OffloadingWorker`` that moves KV-cache blocks with torch."""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence

import torch
from typing_extensions import override

from kvcontract.contracts import (
    BlockIdsSpec,
    GPULoadStoreSpec,
    LoadStoreSpec,
    OffloadingWorker,
    TransferResult,
)
from kvcontract.transfer.copy_engine import CopyEngine, Direction
from kvcontract.transfer.cuda_engine import CudaCopyEngine
from kvcontract.transfer.host_buffer import HostBuffer
from kvcontract.transfer.layout import KVCacheLayout
from kvcontract.transfer.mapping import BlockMapping
from kvcontract.transfer.thread_engine import ThreadCopyEngine

__all__ = ["TorchOffloadingWorker"]


class TorchOffloadingWorker(OffloadingWorker):
    """Copies blocks between the engine's KV-cache tensors and a host buffer, asynchronously.

    ``kv_caches`` is a sequence of per-layer tensors (one KV-cache group) or a sequence of
    such sequences (one per group), blocks on dim 0, or on dim 1 with ``kv_first=True``
    (``(2, num_blocks, ...)``). The host buffer holds ``num_host_blocks`` offload blocks of
    ``blocks_per_offload_block`` GPU blocks each. The host side of a job is a
    ``BlockIdsSpec`` of host block ids, the GPU side a ``GPULoadStoreSpec``.

    Host block ``b`` holds GPU block ``j`` of its offload block at byte
    ``j * layout.bytes_per_gpu_block``: the block's planes back to back, each tensor in
    order, K before V. A group with smaller GPU blocks leaves the rest of each row unused.

    On CUDA the copies run on their own streams after the work already queued on the
    current stream; on CPU background threads copy. A job that raises reports
    ``success=False`` (and 0 bytes) once whatever it had started is done: its destination
    blocks may be partly written, so the caller must not treat them as written. Blocks
    outside a job are never touched. Methods may be called from several threads; call
    ``shutdown()`` when done, to stop the copy threads and unpin the host buffer.
    """

    def __init__(
        self,
        kv_caches: Sequence[torch.Tensor] | Sequence[Sequence[torch.Tensor]],
        *,
        num_host_blocks: int,
        blocks_per_offload_block: int = 1,
        kv_first: bool = False,
        pin_memory: bool | None = None,
        shared_memory_path: str | None = None,
        cuda_zero_copy: bool | None = None,
        cpu_compiled_loop: bool | None = None,
    ) -> None:
        """``pin_memory=None`` pins when the KV caches are on CUDA; ``cuda_zero_copy=None``
        lets kernels address the host buffer when it allows (``False`` forces memcpy);
        ``cpu_compiled_loop=None`` copies host-memory jobs with the compiled loop when the
        package has it (``False`` forces the Python loop, ``True`` requires the compiled one)."""
        self._layout = KVCacheLayout.of(kv_caches, kv_first=kv_first, blocks_per_offload_block=blocks_per_offload_block)
        on_cuda = self._layout.device.type == "cuda"
        self._host = HostBuffer(
            num_host_blocks,
            self._layout.bytes_per_offload_block,
            pin=on_cuda if pin_memory is None else pin_memory,
            shared_memory_path=shared_memory_path,
            device=self._layout.device if on_cuda else None,
        )
        self._engine: CopyEngine = (
            CudaCopyEngine(self._layout, self._host.tensor, zero_copy=cuda_zero_copy)
            if on_cuda
            else ThreadCopyEngine(self._layout, self._host.tensor, compiled_loop=cpu_compiled_loop)
        )
        self._unreported: set[int] = set()
        self._closed = False
        self._lock = threading.Lock()

    @property
    def layout(self) -> KVCacheLayout:
        """The registered KV-cache tensors and the host block geometry."""
        return self._layout

    @property
    def host_buffer(self) -> torch.Tensor:
        """The host blocks, ``(num_host_blocks, bytes_per_offload_block)`` uint8, one row each.

        A tier below host memory reads and writes blocks here by id.
        """
        return self._host.tensor

    @property
    def host_pinned(self) -> bool:
        """Whether the host buffer is page-locked."""
        return self._host.pinned

    @property
    def copy_path(self) -> str:
        """How blocks are copied: ``cpu-threads`` (the compiled loop), ``cpu-threads-python-loop``,
        ``cuda-zero-copy`` or ``cuda-memcpy``."""
        return self._engine.name

    @override
    def submit_store(self, job_id: int, src: GPULoadStoreSpec, dst: LoadStoreSpec) -> bool:
        return self._submit(job_id, Direction.STORE, src, dst)

    @override
    def submit_load(self, job_id: int, src: LoadStoreSpec, dst: GPULoadStoreSpec) -> bool:
        return self._submit(job_id, Direction.LOAD, dst, src)

    @override
    def get_finished(self) -> list[TransferResult]:
        with self._lock:
            done = self._engine.finished()
            self._unreported.difference_update(result.job_id for result in done)
        return done

    @override
    def wait(self, job_ids: Collection[int]) -> None:
        self._engine.wait(job_ids)

    @override
    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._engine.shutdown()
        self._host.close()

    def _submit(self, job_id: int, direction: Direction, gpu: GPULoadStoreSpec, host: LoadStoreSpec) -> bool:
        if not isinstance(host, BlockIdsSpec):
            raise TypeError(
                f"the host side of a {direction.value} is a BlockIdsSpec of host block ids, got {type(host).__name__}"
            )
        # The boundary: the mapping proves every id an integer in range before a byte moves.
        mapping = BlockMapping.of(
            self._layout,
            gpu,
            host.block_ids,
            num_host_blocks=self._host.tensor.shape[0],
            to_gpu=direction is Direction.LOAD,
        )
        with self._lock:
            if self._closed:
                return False
            if job_id in self._unreported:
                raise ValueError(
                    f"job {job_id} is still running or not yet reported by get_finished(): give each job its own id"
                )
            self._unreported.add(job_id)
            try:
                self._engine.submit(job_id, direction, mapping)
            except BaseException:
                self._unreported.discard(job_id)  # never started: nothing will report it
                raise
        return True
