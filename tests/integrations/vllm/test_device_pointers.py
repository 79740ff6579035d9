"""The worker over canonical KV caches of several groups, and vLLM 0.34's device pointers it refuses.

The caches are built as vLLM's connector builds them (``CanonicalKVCaches``: int8
``(num_blocks, page_bytes)`` tensors, per group the layer references), and jobs go through
vLLM's own ``resolve_device_pointers`` on 0.34 (its GPU spec on 0.33). A pointer that is not
a block start of those caches, or has the wrong size, fails its job and copies nothing. On a
CUDA device the same tests run on CUDA caches (tools/device_check.sh).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pytest
import torch
from vllm.v1.kv_offload.base import CanonicalKVCacheRef, CanonicalKVCaches, CanonicalKVCacheTensor
from vllm.v1.kv_offload.base import GPULoadStoreSpec as VLLMGPULoadStoreSpec

from kvcontract.contracts import BlockIdsSpec
from kvcontract.integrations.vllm import KVContractHostSpec, KVContractOffloadingWorker
from kvcontract.integrations.vllm.worker import worker_tensors
from kvcontract.transfer import TorchOffloadingWorker
from tests.integrations.vllm.support import VLLM_0_34

if TYPE_CHECKING:  # vLLM 0.34 only
    from vllm.v1.kv_offload.base import DevicePointers

NUM_BLOCKS = 16
BLOCKS_PER_CHUNK = 2
PAGES = (256, 256, 96)
"""Page bytes of the three canonical tensors: group 0 has two layers, group 1 one with smaller pages."""


@pytest.fixture(
    params=[
        "cpu",
        pytest.param(
            "cuda",
            marks=pytest.mark.skipif(
                not torch.cuda.is_available(), reason="needs a CUDA device (tools/device_check.sh)"
            ),
        ),
    ]
)
def caches(request: pytest.FixtureRequest) -> CanonicalKVCaches:
    generator = torch.Generator().manual_seed(3)
    device = torch.device(str(request.param))
    tensors = [
        CanonicalKVCacheTensor(
            torch.randint(-128, 128, (NUM_BLOCKS, page), dtype=torch.int8, generator=generator).to(device), page
        )
        for page in PAGES
    ]
    refs = [[CanonicalKVCacheRef(0, PAGES[0]), CanonicalKVCacheRef(1, PAGES[1])], [CanonicalKVCacheRef(2, PAGES[2])]]
    return CanonicalKVCaches(tensors=tensors, group_data_refs=refs)


@pytest.fixture
def worker(caches: CanonicalKVCaches) -> Iterator[KVContractOffloadingWorker]:
    inner = TorchOffloadingWorker(worker_tensors(caches), num_host_blocks=8, blocks_per_offload_block=BLOCKS_PER_CHUNK)
    adapter = KVContractOffloadingWorker(inner, caches, blocks_per_offload_block=BLOCKS_PER_CHUNK)
    yield adapter
    adapter.shutdown()


def device_side(spec: VLLMGPULoadStoreSpec, caches: CanonicalKVCaches) -> VLLMGPULoadStoreSpec | DevicePointers:
    """What vLLM's connector hands the worker for ``spec``: device pointers on 0.34, the spec itself on 0.33."""
    if not VLLM_0_34:
        return spec
    from vllm.v1.kv_offload.pointer_utils import resolve_device_pointers  # vLLM 0.34 only

    return resolve_device_pointers(spec, caches)


def run(worker: KVContractOffloadingWorker, job_id: int, submit: Callable[[], bool]) -> bool:
    """Submit one job, wait for it, and return its success."""
    assert submit()
    worker.wait({job_id})
    results = worker.get_finished()
    assert [result.job_id for result in results] == [job_id]
    return results[0].success


def blocks(caches: CanonicalKVCaches, group: int, ids: list[int]) -> list[torch.Tensor]:
    """Copies of the pages ``ids`` of every tensor of ``group``."""
    return [caches.tensors[ref.tensor_idx].tensor[ids].clone() for ref in caches.group_data_refs[group]]


def test_groups_layers_and_an_unaligned_first_block_round_trip_byte_exact(
    worker: KVContractOffloadingWorker, caches: CanonicalKVCaches
) -> None:
    # Group 0: three GPU blocks from the second of its first offload block (two host blocks);
    # group 1: two GPU blocks, aligned (one host block).
    source0, source1 = [4, 9, 2], [7, 3]
    spec = VLLMGPULoadStoreSpec(source0 + source1, [3, 2], [1, 0])
    host = KVContractHostSpec(BlockIdsSpec([6, 1, 4]))
    expected = blocks(caches, 0, source0), blocks(caches, 1, source1)
    assert run(worker, 1, lambda: worker.submit_store(1, device_side(spec, caches), host))
    for tensor in caches.tensors:
        tensor.tensor.random_(-128, 127)  # scrambled: the load must bring the stored bytes back
    target0, target1 = [11, 12, 13], [14, 15]
    back = VLLMGPULoadStoreSpec(target0 + target1, [3, 2], [1, 0])
    assert run(worker, 2, lambda: worker.submit_load(2, host, device_side(back, caches)))
    for got, want in zip(blocks(caches, 0, target0) + blocks(caches, 1, target1), expected[0] + expected[1]):
        assert torch.equal(got, want)


needs_pointers = pytest.mark.skipif(
    not VLLM_0_34, reason="vLLM before 0.34 (0.33, 0.32) passes block ids, not device pointers"
)


def shifted(caches: CanonicalKVCaches, change: Callable[[np.ndarray, np.ndarray], None]) -> DevicePointers:
    """vLLM's pointers for blocks 4 and 5 of group 0 and 7 of group 1, then ``change``d (pointers, sizes)."""
    from vllm.v1.kv_offload.pointer_utils import resolve_device_pointers  # vLLM 0.34 only

    pointers = resolve_device_pointers(VLLMGPULoadStoreSpec([4, 5, 7], [2, 1], [0, 0]), caches)
    # vLLM types the arrays as bare ndarrays; the slices are copies with a known type.
    ptrs: npt.NDArray[np.uint64] = np.array(pointers.ptrs[:], dtype=np.uint64)
    sizes: npt.NDArray[np.uint64] = np.array(pointers.sizes[:], dtype=np.uint64)
    change(ptrs, sizes)
    return dataclasses.replace(pointers, ptrs=ptrs, sizes=sizes)


def _below_the_caches(ptrs: np.ndarray, sizes: np.ndarray) -> None:
    ptrs[0] -= np.uint64(PAGES[0])


def _past_the_last_block(ptrs: np.ndarray, sizes: np.ndarray) -> None:
    ptrs[4] += np.uint64(PAGES[2] * NUM_BLOCKS)


def _into_a_page(ptrs: np.ndarray, sizes: np.ndarray) -> None:
    ptrs[1] += np.uint64(8)


def _another_layers_block(ptrs: np.ndarray, sizes: np.ndarray) -> None:
    ptrs[2] += np.uint64(PAGES[1])  # layer 1 names block 5 where layer 0 names block 4


def _a_wrong_size(ptrs: np.ndarray, sizes: np.ndarray) -> None:
    sizes[3] += np.uint64(1)


BAD_POINTERS = [_below_the_caches, _past_the_last_block, _into_a_page, _another_layers_block, _a_wrong_size]


@needs_pointers
@pytest.mark.parametrize("change", BAD_POINTERS, ids=lambda change: change.__name__.strip("_"))
def test_a_store_from_a_pointer_it_did_not_prove_fails_and_copies_nothing(
    worker: KVContractOffloadingWorker,
    caches: CanonicalKVCaches,
    change: Callable[[np.ndarray, np.ndarray], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    inner = worker.inner
    assert isinstance(inner, TorchOffloadingWorker)
    host_before = inner.host_buffer.clone()
    host = KVContractHostSpec(BlockIdsSpec([0, 1]))
    assert not run(worker, 5, lambda: worker.submit_store(5, shifted(caches, change), host))
    assert torch.equal(inner.host_buffer, host_before)
    assert [record.getMessage() for record in caplog.records if "job 5 refused" in record.getMessage()]


@needs_pointers
@pytest.mark.parametrize("change", BAD_POINTERS, ids=lambda change: change.__name__.strip("_"))
def test_a_load_to_a_pointer_it_did_not_prove_fails_and_writes_nothing(
    worker: KVContractOffloadingWorker, caches: CanonicalKVCaches, change: Callable[[np.ndarray, np.ndarray], None]
) -> None:
    host = KVContractHostSpec(BlockIdsSpec([0, 1]))
    before = [tensor.tensor.clone() for tensor in caches.tensors]
    assert not run(worker, 6, lambda: worker.submit_load(6, host, shifted(caches, change)))
    assert all(torch.equal(tensor.tensor, kept) for tensor, kept in zip(caches.tensors, before))
