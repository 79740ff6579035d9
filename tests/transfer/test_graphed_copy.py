"""Small CUDA jobs replay captured graphs: jobs of one shape queued back to back stay apart."""

from __future__ import annotations

import random

import pytest
import torch

from kvcontract import BlockIdsSpec, GPULoadStoreSpec
from kvcontract.transfer import TorchOffloadingWorker

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

BLOCKS = 64
PER_JOB = 3
"""Padded to 4 blocks per graph: the last pair of each job is copied twice."""


def test_jobs_of_one_shape_queued_back_to_back_copy_their_own_blocks() -> None:
    generator = torch.Generator().manual_seed(5)
    kv = torch.randint(0, 256, (BLOCKS, 512), dtype=torch.uint8, generator=generator).cuda()
    expected = kv.clone()
    order = random.Random(5).sample(range(BLOCKS), BLOCKS)
    jobs = [(order[at : at + PER_JOB], list(range(at, at + PER_JOB))) for at in range(0, 8 * PER_JOB, PER_JOB)]
    worker = TorchOffloadingWorker([kv], num_host_blocks=BLOCKS)
    try:
        assert worker.copy_path == "cuda-zero-copy"
        for job_id, (gpu, host) in enumerate(jobs, start=1):
            assert worker.submit_store(job_id, GPULoadStoreSpec(gpu), BlockIdsSpec(host))
        worker.wait(range(1, len(jobs) + 1))
        assert all(result.success for result in worker.get_finished())
        for gpu, host in jobs:
            assert torch.equal(worker.host_buffer[host], expected[gpu].cpu())

        kv.zero_()
        for job_id, (gpu, host) in enumerate(jobs, start=len(jobs) + 1):
            assert worker.submit_load(job_id, BlockIdsSpec(host), GPULoadStoreSpec(gpu))
        worker.wait(range(len(jobs) + 1, 2 * len(jobs) + 1))
        assert all(result.success for result in worker.get_finished())
        loaded = [block for gpu, _ in jobs for block in gpu]
        assert torch.equal(kv[loaded], expected[loaded])
        untouched = sorted(set(range(BLOCKS)) - set(loaded))
        assert not kv[untouched].any(), "a padded pair wrote a block outside its job"
    finally:
        worker.shutdown()
