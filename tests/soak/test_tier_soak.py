"""Soak: each tier stores 12,000 blocks, one small job after another, and holds no more memory than at 3,000 (within 1.5x).

Nobody takes events, as SGLang never does; the remote tiers remember at most ``KNOWN_KEYS``
keys, the file tier indexes at most its capacity. What Python allocations hold
(``tracemalloc``, after collecting garbage) is measured once 3,000 blocks are stored and again
at 12,000: a structure that kept one entry per stored block (an event, a key) would make the
second about four times the first's growth.
"""

from __future__ import annotations

import gc
import itertools
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from kvcontract import SecondaryTier, TierJob, make_offload_key
from kvcontract.testing import example_identity
from kvcontract.tiers import FileTier, MooncakeTier, RedisTier
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.tiers.mooncake.support import store_or_skip
from tests.tiers.redis.support import lru_server_or_skip
from tests.tiers.support import drain

pytestmark = pytest.mark.soak

BLOCK_BYTES = 256
HOST_BLOCKS = 16
JOB_BLOCKS = 8
FIRST = 3_000
SECOND = 12_000
GROWTH_LIMIT = 1.5
KNOWN_KEYS = 1_024
FILE_CAPACITY = 1_024
OPTIONS = RemoteTierOptions(io_threads=2, known_keys=KNOWN_KEYS, job_deadline=30.0)


def _store_until(tier: SecondaryTier, host: torch.Tensor, keys: Iterator[int], jobs: Iterator[int], total: int) -> None:
    """Store blocks of fresh keys, ``JOB_BLOCKS`` a job, until ``total`` keys were used; every job must succeed."""
    while True:
        batch = list(itertools.islice(keys, JOB_BLOCKS))
        job_id = next(jobs)
        job = TierJob(job_id, [make_offload_key(i.to_bytes(8, "big")) for i in batch], range(len(batch)))
        assert tier.submit_store(job)
        assert drain(tier, [job_id])[job_id].success
        if batch[-1] + 1 >= total:
            return


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def _soak(make: Callable[[torch.Tensor], SecondaryTier]) -> tuple[int, int]:
    """Bytes traced at ``FIRST`` and at ``SECOND`` stored blocks, counted from just before the tier was built."""
    host = torch.randint(0, 255, (HOST_BLOCKS, BLOCK_BYTES), dtype=torch.uint8)
    keys, jobs = itertools.count(), itertools.count(1)
    tracemalloc.start()
    try:
        start = _traced()
        tier = make(host)
        try:
            _store_until(tier, host, keys, jobs, FIRST)
            first = _traced() - start
            _store_until(tier, host, keys, jobs, SECOND)
            second = _traced() - start
        finally:
            tier.shutdown()
    finally:
        tracemalloc.stop()
    return first, second


def _check(first: int, second: int) -> None:
    assert second <= GROWTH_LIMIT * first, f"traced memory {first} bytes at {FIRST} blocks, {second} at {SECOND}"


def test_a_redis_tier_keeps_its_memory_flat(tmp_path: Path) -> None:
    server = lru_server_or_skip(tmp_path / "redis")
    try:
        identity = example_identity(BLOCK_BYTES)
        _check(*_soak(lambda host: RedisTier(host, identity=identity, url=server.url, options=OPTIONS)))
    finally:
        server.stop()


def test_a_mooncake_tier_keeps_its_memory_flat(tmp_path: Path) -> None:
    store = store_or_skip(tmp_path / "mooncake")
    try:
        identity = example_identity(BLOCK_BYTES)

        def make(host: torch.Tensor) -> MooncakeTier:
            return MooncakeTier(
                host,
                identity=identity,
                client=store.client(),
                options=OPTIONS,
            )

        _check(*_soak(make))
    finally:
        store.close()


def test_a_file_tier_keeps_its_memory_flat(tmp_path: Path) -> None:
    identity = example_identity(BLOCK_BYTES)
    _check(*_soak(lambda host: FileTier(tmp_path / "files", FILE_CAPACITY, host, identity=identity, io_threads=2)))
