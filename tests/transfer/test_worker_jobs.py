"""Job semantics of TorchOffloadingWorker: asynchrony, reporting, waiting, failures, shutdown."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from kvcontract import BlockIdsSpec, ContractViolation, GPULoadStoreSpec, LoadStoreSpec
from kvcontract.transfer import TorchOffloadingWorker, graphed_copy, thread_engine
from kvcontract.transfer.copy_engine import Direction
from kvcontract.transfer.cuda_engine import CudaCopyEngine
from kvcontract.transfer.staged_copy import PreparedJob
from kvcontract.transfer.thread_engine import GIL_SLICE_BYTES, Pages, ThreadCopyEngine
from tests.transfer.support import (
    BACKENDS,
    CPU_BACKENDS,
    NEEDS_COMPILED_LOOP,
    Backend,
    same_bytes,
)

GATE_SECONDS = 30
"""How long a gated copy waits for the test before failing it (a safety net, not a timing)."""


def kv_cache(device: str, num_blocks: int = 8, seed: int = 0) -> list[torch.Tensor]:
    """Two layers of random float32 blocks of 64 bytes."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn((num_blocks, 4, 4), generator=generator).to(device) for _ in range(2)]


@pytest.fixture
def cpu_worker() -> Iterator[TorchOffloadingWorker]:
    """A CPU worker over 8 GPU blocks and 8 host blocks."""
    worker = TorchOffloadingWorker(kv_cache("cpu"), num_host_blocks=8)
    yield worker
    worker.shutdown()


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Holds every CPU copy until the test sets the event."""
    event = threading.Event()
    copy = ThreadCopyEngine.copy_pages

    def gated(self: ThreadCopyEngine, pages: Pages) -> None:
        if not event.wait(GATE_SECONDS):
            raise TimeoutError("the test never opened the gate")
        copy(self, pages)

    monkeypatch.setattr(ThreadCopyEngine, "copy_pages", gated)
    yield event
    event.set()


def test_submits_return_before_the_copy_and_results_come_once(
    gate: threading.Event, cpu_worker: TorchOffloadingWorker
) -> None:
    assert cpu_worker.submit_store(1, GPULoadStoreSpec([0, 3]), BlockIdsSpec([5, 6]))
    assert cpu_worker.submit_load(2, BlockIdsSpec([1]), GPULoadStoreSpec([7]))
    assert cpu_worker.get_finished() == []
    gate.set()
    cpu_worker.wait([1, 2])
    results = sorted(cpu_worker.get_finished(), key=lambda r: r.job_id)
    assert [(r.job_id, r.success, r.transfer_bytes) for r in results] == [
        (1, True, 2 * 128),
        (2, True, 128),
    ]
    assert all(r.transfer_seconds > 0 for r in results)
    assert cpu_worker.get_finished() == []


def test_wait_blocks_until_the_job_is_done(gate: threading.Event, cpu_worker: TorchOffloadingWorker) -> None:
    cpu_worker.submit_store(1, GPULoadStoreSpec([2]), BlockIdsSpec([2]))
    returned = threading.Event()

    def wait_then_flag() -> None:
        cpu_worker.wait([1])
        returned.set()

    waiter = threading.Thread(target=wait_then_flag)
    waiter.start()
    assert not returned.is_set() and cpu_worker.get_finished() == []
    gate.set()
    waiter.join()
    assert returned.is_set()
    assert [r.job_id for r in cpu_worker.get_finished()] == [1]


def test_wait_returns_at_once_for_jobs_already_done_or_unknown(
    cpu_worker: TorchOffloadingWorker,
) -> None:
    cpu_worker.submit_store(1, GPULoadStoreSpec([2]), BlockIdsSpec([2]))
    cpu_worker.wait([1])
    cpu_worker.wait([1, 99])
    assert [r.job_id for r in cpu_worker.get_finished()] == [1]


def test_a_job_id_cannot_be_reused_before_its_result_is_taken(
    cpu_worker: TorchOffloadingWorker,
) -> None:
    cpu_worker.submit_store(1, GPULoadStoreSpec([2]), BlockIdsSpec([2]))
    with pytest.raises(ValueError, match="job 1 is still running or not yet reported"):
        cpu_worker.submit_store(1, GPULoadStoreSpec([3]), BlockIdsSpec([3]))
    cpu_worker.wait([1])
    cpu_worker.get_finished()
    assert cpu_worker.submit_store(1, GPULoadStoreSpec([3]), BlockIdsSpec([3]))


@pytest.mark.parametrize("bad", [1.0, 1.7, True, "1", np.float64(1)], ids=repr)
@pytest.mark.parametrize("side", ["gpu", "host"])
def test_an_id_that_is_not_an_integer_is_refused_before_any_byte_moves(
    cpu_worker: TorchOffloadingWorker, side: str, bad: Any
) -> None:
    before = cpu_worker.host_buffer.clone()
    gpu, host = ([0, bad], [0, 1]) if side == "gpu" else ([0, 1], [0, bad])
    field = "GPULoadStoreSpec.block_ids" if side == "gpu" else "BlockIdsSpec.block_ids"
    with pytest.raises(ValueError, match=rf"{field} must be a flat sequence of integers, got"):
        cpu_worker.submit_store(1, GPULoadStoreSpec(gpu), BlockIdsSpec(host))
    with pytest.raises(ValueError, match=rf"{field} must be a flat sequence of integers, got"):
        cpu_worker.submit_load(2, BlockIdsSpec(host), GPULoadStoreSpec(gpu))
    cpu_worker.wait([1, 2])
    assert cpu_worker.get_finished() == []
    assert torch.equal(cpu_worker.host_buffer, before)
    assert cpu_worker.submit_store(1, GPULoadStoreSpec([0, 1]), BlockIdsSpec([0, 1]))


@pytest.mark.parametrize(
    "ids",
    [np.array([3, 4]), torch.tensor([3, 4], dtype=torch.int32), (np.int64(3), np.uint16(4))],
    ids=["numpy", "torch", "numpy-scalars"],
)
def test_numpy_and_torch_integer_ids_are_ids(cpu_worker: TorchOffloadingWorker, ids: Any) -> None:
    assert cpu_worker.submit_store(1, GPULoadStoreSpec(ids), BlockIdsSpec(ids))
    cpu_worker.wait([1])
    assert [(r.job_id, r.success, r.transfer_bytes) for r in cpu_worker.get_finished()] == [(1, True, 256)]


def test_a_job_whose_copy_engine_refuses_the_submit_is_not_left_unreported(
    cpu_worker: TorchOffloadingWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: ThreadCopyEngine, job_id: int, direction: Direction, mapping: object) -> None:
        raise RuntimeError("injected submit failure")

    with monkeypatch.context() as patch:
        patch.setattr(ThreadCopyEngine, "submit", refuse)
        with pytest.raises(RuntimeError, match="injected submit failure"):
            cpu_worker.submit_store(1, GPULoadStoreSpec([0]), BlockIdsSpec([0]))
    assert cpu_worker.submit_store(1, GPULoadStoreSpec([0]), BlockIdsSpec([0]))


def test_the_host_side_must_be_host_block_ids(cpu_worker: TorchOffloadingWorker) -> None:
    with pytest.raises(TypeError, match="BlockIdsSpec of host block ids, got GPULoadStoreSpec"):
        cpu_worker.submit_store(1, GPULoadStoreSpec([0]), GPULoadStoreSpec([1]))
    with pytest.raises(TypeError, match="got LoadStoreSpec"):
        cpu_worker.submit_load(2, LoadStoreSpec(), GPULoadStoreSpec([1]))


def test_contract_calls_are_checked_at_run_time(cpu_worker: TorchOffloadingWorker) -> None:
    block_ids: Any = [0, 1]
    with pytest.raises(ContractViolation, match="OffloadingWorker.submit_store"):
        cpu_worker.submit_store(1, block_ids, BlockIdsSpec([0, 1]))


def test_after_shutdown_jobs_are_finished_and_new_ones_refused(
    gate: threading.Event, cpu_worker: TorchOffloadingWorker
) -> None:
    cpu_worker.submit_store(1, GPULoadStoreSpec([4]), BlockIdsSpec([4]))
    gate.set()
    cpu_worker.shutdown()
    assert [(r.job_id, r.success) for r in cpu_worker.get_finished()] == [(1, True)]
    assert not cpu_worker.submit_store(2, GPULoadStoreSpec([4]), BlockIdsSpec([4]))
    assert not cpu_worker.submit_load(3, BlockIdsSpec([4]), GPULoadStoreSpec([4]))
    cpu_worker.shutdown()


def test_the_cpu_loop_is_the_compiled_one_when_built_and_can_be_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    python = TorchOffloadingWorker(kv_cache("cpu"), num_host_blocks=2, cpu_compiled_loop=False)
    python.shutdown()
    assert python.copy_path == "cpu-threads-python-loop"
    monkeypatch.setattr(thread_engine, "compiled_copy_runs", None)
    with pytest.raises(ValueError, match="installed without its compiled copy loop .* or pass compiled_loop=False"):
        TorchOffloadingWorker(kv_cache("cpu"), num_host_blocks=2, cpu_compiled_loop=True)
    unbuilt = TorchOffloadingWorker(kv_cache("cpu"), num_host_blocks=2)
    unbuilt.shutdown()
    assert unbuilt.copy_path == "cpu-threads-python-loop"


@NEEDS_COMPILED_LOOP
def test_a_built_package_copies_with_the_compiled_loop_by_default() -> None:
    worker = TorchOffloadingWorker(kv_cache("cpu"), num_host_blocks=2)
    worker.shutdown()
    assert worker.copy_path == "cpu-threads"


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_a_run_longer_than_a_gil_slice_is_copied_whole(backend: Backend) -> None:
    block_bytes = 3 * 4096 + 8
    num_blocks = 2 * GIL_SLICE_BYTES // block_bytes + 3
    generator = torch.Generator().manual_seed(3)
    kv = torch.randint(0, 256, (num_blocks, block_bytes), dtype=torch.uint8, generator=generator)
    back = torch.zeros_like(kv)
    storer = backend.worker([kv], num_host_blocks=num_blocks)
    loader = backend.worker([back], num_host_blocks=num_blocks)
    try:
        every = list(range(num_blocks))
        assert storer.submit_store(1, GPULoadStoreSpec(every), BlockIdsSpec(every))
        storer.wait([1])
        assert [r.success for r in storer.get_finished()] == [True]
        assert torch.equal(storer.host_buffer.view(num_blocks, block_bytes), kv)
        loader.host_buffer.copy_(storer.host_buffer)
        assert loader.submit_load(2, BlockIdsSpec(every), GPULoadStoreSpec(every))
        loader.wait([2])
        assert [r.success for r in loader.get_finished()] == [True]
        assert torch.equal(back, kv)
    finally:
        storer.shutdown()
        loader.shutdown()


def inject_failure(monkeypatch: pytest.MonkeyPatch, backend: Backend) -> None:
    """Make every copy write part of its blocks, then raise (on CUDA: every eager copy)."""
    if backend.device == "cpu":
        copy = ThreadCopyEngine.copy_pages

        def half_then_raise(self: ThreadCopyEngine, pages: Pages) -> None:
            half = len(pages.dst) // 2
            copy(self, Pages(pages.dst[:half], pages.src[:half], pages.sizes[:half]))
            raise RuntimeError("injected copy failure")

        monkeypatch.setattr(ThreadCopyEngine, "copy_pages", half_then_raise)
    else:
        monkeypatch.setattr(graphed_copy, "GRAPH_MAX_BYTES", 0)
        enqueue = CudaCopyEngine.enqueue

        def first_step_then_raise(self: CudaCopyEngine, direction: Direction, job: PreparedJob) -> None:
            enqueue(self, direction, dataclasses.replace(job, steps=job.steps[:1]))
            raise RuntimeError("injected copy failure")

        monkeypatch.setattr(CudaCopyEngine, "enqueue", first_step_then_raise)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_copy_that_raises_fails_its_job_and_touches_only_mapped_blocks(
    monkeypatch: pytest.MonkeyPatch, backend: Backend
) -> None:
    groups = [kv_cache(backend.device, seed=1), kv_cache(backend.device, seed=2)]
    worker = backend.worker(groups, num_host_blocks=8)
    try:
        worker.host_buffer.zero_()
        sources = [[t.clone() for t in group] for group in groups]
        inject_failure(monkeypatch, backend)
        spec = GPULoadStoreSpec([1, 2, 3, 4], group_sizes=[2, 2])
        assert worker.submit_store(1, spec, BlockIdsSpec([6, 2, 5, 0]))
        worker.wait([1])
        (result,) = worker.get_finished()
        assert (result.job_id, result.success, result.transfer_bytes) == (1, False, 0)
        untouched = [1, 3, 4, 7]
        assert not worker.host_buffer[untouched].any(), "a failed store wrote unmapped blocks"

        for group in groups:
            for tensor in group:
                tensor.fill_(-1.0)
        assert worker.submit_load(2, BlockIdsSpec([6, 2, 5, 0]), spec)
        worker.wait([2])
        assert [r.success for r in worker.get_finished()] == [False]
        for group, _source in zip(groups, sources):
            for tensor in group:
                unmapped = tensor[[0, 5, 6, 7]]
                assert bool((unmapped == -1.0).all()), "a failed load wrote unmapped blocks"

        monkeypatch.undo()
        for group, source in zip(groups, sources):
            for tensor, original in zip(group, source):
                tensor.copy_(original)
        assert worker.submit_store(3, spec, BlockIdsSpec([6, 2, 5, 0]))
        worker.wait([3])
        assert [r.success for r in worker.get_finished()] == [True]
        assert same_bytes(worker.host_buffer[6][:128], torch.cat([t[1] for t in sources[0]]))
    finally:
        worker.shutdown()


@pytest.mark.parametrize("backend", BACKENDS)
def test_workers_on_one_shared_memory_file_see_each_others_blocks(tmp_path: Path, backend: Backend) -> None:
    path = str(tmp_path / "host")
    source, target = kv_cache(backend.device, seed=3), kv_cache(backend.device, seed=4)
    # A file may refuse pinning (then pageable and memcpy), so zero-copy is not required here.
    either_way = dataclasses.replace(backend, zero_copy=None if backend.zero_copy else backend.zero_copy)
    storer = either_way.worker(source, num_host_blocks=4, shared_memory_path=path)
    loader = either_way.worker(target, num_host_blocks=4, shared_memory_path=path)
    try:
        storer.submit_store(1, GPULoadStoreSpec([5, 6]), BlockIdsSpec([3, 0]))
        storer.wait([1])
        loader.submit_load(1, BlockIdsSpec([3, 0]), GPULoadStoreSpec([0, 1]))
        loader.wait([1])
        assert [r.success for r in storer.get_finished() + loader.get_finished()] == [True, True]
        assert all(same_bytes(t[[0, 1]], s[[5, 6]]) for t, s in zip(target, source))
    finally:
        storer.shutdown()
        loader.shutdown()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("zero_copy", [None, False])
def test_a_cuda_store_reads_blocks_only_after_the_compute_stream_wrote_them(
    zero_copy: bool | None,
) -> None:
    kv = [torch.zeros((64, 1024, 256), device="cuda")]
    worker = TorchOffloadingWorker(kv, num_host_blocks=64, cuda_zero_copy=zero_copy)
    try:
        blocks = torch.tensor([3, 9], device="cuda")
        busy = torch.randn((4096, 4096), device="cuda")
        torch.cuda.synchronize()
        for _ in range(20):
            busy = busy @ busy / 64
        kv[0].index_fill_(0, blocks, 7.0)
        worker.submit_store(1, GPULoadStoreSpec([3, 9]), BlockIdsSpec([0, 1]))
        worker.wait([1])
        assert [r.success for r in worker.get_finished()] == [True]
        stored = worker.host_buffer[:2].view(torch.float32)
        assert bool((stored == 7.0).all())
    finally:
        worker.shutdown()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_the_host_buffer_is_pinned_and_kernels_address_it() -> None:
    worker = TorchOffloadingWorker([torch.zeros((4, 64), device="cuda")], num_host_blocks=4)
    try:
        assert worker.host_pinned
        assert worker.copy_path == "cuda-zero-copy"
    finally:
        worker.shutdown()


@pytest.mark.parametrize("backend", BACKENDS)
def test_kv_caches_made_under_inference_mode_round_trip(backend: Backend) -> None:
    with torch.inference_mode():
        kv = [torch.randn((6, 8, 2), device=backend.device) for _ in range(2)]
    worker = backend.worker(kv, num_host_blocks=3)
    try:
        worker.submit_store(1, GPULoadStoreSpec([4, 1]), BlockIdsSpec([2, 0]))
        worker.wait([1])
        worker.submit_load(2, BlockIdsSpec([2, 0]), GPULoadStoreSpec([0, 5]))
        worker.wait([2])
        assert [r.success for r in worker.get_finished()] == [True, True]
        assert all(same_bytes(t[[0, 5]], t[[4, 1]]) for t in kv)
    finally:
        worker.shutdown()
