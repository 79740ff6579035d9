"""The semantic contract of ``OffloadingWorker``: byte-exact round trips between KV caches and host blocks.

Stores copy chosen GPU blocks to host blocks, the GPU blocks are wiped, and loads bring them
back into other GPU blocks; every byte must match, every job must be reported once, and a
job whose ids are out of range must be refused or reported failed, never half-applied as a success.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import torch
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule
from typing_extensions import override

from kvcontract.contracts import BlockIdsSpec, GPULoadStoreSpec, OffloadingWorker, TransferResult
from kvcontract.testing.conformance import require
from kvcontract.testing.containers import Form, Param, as_collection, call_with, collection_forms
from kvcontract.testing.reports import one_report

__all__ = ["GPU_BLOCKS", "HOST_BLOCKS", "WorkerFactory", "worker_machine"]

GPU_BLOCKS = 12
"""Blocks of each layer tensor given to the factory (on dim 0)."""
HOST_BLOCKS = 8
"""Host blocks the factory is asked to allocate."""

WorkerFactory = Callable[[Sequence[torch.Tensor], int], OffloadingWorker]
"""What ``check_worker`` is given: builds a worker over per-layer KV caches with that many host blocks."""

_WAIT = Param("OffloadingWorker.wait", "job_ids", "Collection")
_block_lists = st.lists(st.integers(0, GPU_BLOCKS - 1), min_size=1, max_size=4, unique=True)


def worker_machine(factory: WorkerFactory, layer_shape: tuple[int, ...], layers: int) -> type[RuleBasedStateMachine]:
    """A state machine class that checks the worker ``factory`` builds over ``layers`` tensors of ``layer_shape``."""

    class WorkerConformance(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            generator = torch.Generator().manual_seed(0)
            self.caches = [
                torch.randint(0, 255, (GPU_BLOCKS, *layer_shape), generator=generator, dtype=torch.uint8)
                for _ in range(layers)
            ]
            self.worker = factory(self.caches, HOST_BLOCKS)
            self.host: dict[int, list[torch.Tensor]] = {}
            self.jobs = itertools.count(1)

        @override
        def teardown(self) -> None:
            self.worker.shutdown()

        def _finish(self, job: int, form: Form) -> TransferResult:
            job_ids = as_collection(form, [job])
            call_with(_WAIT, form, job_ids, lambda: self.worker.wait(job_ids))
            return one_report(self.worker.get_finished, job)

        @rule(gpu=_block_lists, data=st.data(), form=collection_forms)
        def store(self, gpu: list[int], data: st.DataObject, form: Form) -> None:
            host = data.draw(
                st.lists(st.integers(0, HOST_BLOCKS - 1), min_size=len(gpu), max_size=len(gpu), unique=True)
            )
            job = next(self.jobs)
            require(
                self.worker.submit_store(job, GPULoadStoreSpec(gpu), BlockIdsSpec(host)),
                "a valid store is accepted",
                f"{gpu} -> {host}",
            )
            result = self._finish(job, form)
            require(result.success, "a valid store succeeds", f"{gpu} -> {host}")
            for g, h in zip(gpu, host):
                self.host[h] = [cache[g].clone() for cache in self.caches]

        @rule(data=st.data(), form=collection_forms)
        def load(self, data: st.DataObject, form: Form) -> None:
            if not self.host:
                return
            host = data.draw(st.lists(st.sampled_from(sorted(self.host)), min_size=1, max_size=4, unique=True))
            gpu = data.draw(
                st.lists(st.integers(0, GPU_BLOCKS - 1), min_size=len(host), max_size=len(host), unique=True)
            )
            for g in gpu:
                for cache in self.caches:
                    cache[g].zero_()
            job = next(self.jobs)
            require(
                self.worker.submit_load(job, BlockIdsSpec(host), GPULoadStoreSpec(gpu)),
                "a valid load is accepted",
                f"{host} -> {gpu}",
            )
            require(self._finish(job, form).success, "a valid load succeeds", f"{host} -> {gpu}")
            for h, g in zip(host, gpu):
                for layer, cache in enumerate(self.caches):
                    require(
                        torch.equal(cache[g], self.host[h][layer]),
                        "a load brings back exactly the bytes stored",
                        f"host {h} -> GPU {g}, layer {layer}",
                    )

        @rule(gpu=_block_lists)
        def store_out_of_range(self, gpu: list[int]) -> None:
            job = next(self.jobs)
            host = [HOST_BLOCKS + i for i in range(len(gpu))]
            try:
                accepted = self.worker.submit_store(job, GPULoadStoreSpec(gpu), BlockIdsSpec(host))
            except (ValueError, IndexError):
                return
            if accepted:
                require(
                    not self._finish(job, Form.LIST).success,
                    "a job naming blocks out of range is refused or fails",
                    f"host ids {host}",
                )

    return WorkerConformance
