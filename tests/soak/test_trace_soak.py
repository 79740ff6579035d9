"""Soak: the shipped trace replayed again and again through a tiered manager keeps its memory flat.

A host-memory primary with reuse admission in front and a file tier below, assembled from
a config as an operator would. The replay never calls ``take_events``, as an engine with
events off would not. After warm-up passes, which fill the primary, the tier, the reuse
tracker and every cache the interpreter keeps, each further pass must leave the memory
that Python allocations hold (``tracemalloc``) where it was, and the filter's admitted
keys within the primary's capacity.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from pathlib import Path

import pytest
import torch

from kvcontract.assembly import build_manager
from kvcontract.config import KVContractConfig
from kvcontract.enforce import checks_enabled, configure
from kvcontract.managers import FilterReusedOffloadingManager, TieringOffloadingManager
from kvcontract.sim import replay
from kvcontract.sim.trace import TraceRequest, read_trace
from tests.sim.support import TRACE

pytestmark = pytest.mark.soak

REQUESTS = 2_000
"""The first requests of the trace: 48,000 blocks a pass, with reuse inside and across passes."""
WARM_UP_PASSES = 2
MEASURED_PASSES = 2
PRIMARY_BLOCKS = 1_000
TIER_BLOCKS = 4_000
TRACKER_KEYS = 8_000
GROWTH_LIMIT_BYTES = 1024 * 1024
"""Flat within noise: dict resizes move a pass's end by a few hundred KiB; per-request state or
events kept for a pass's 48,000 blocks would add several MiB."""
SETTLE_SECONDS = 120
"""How long the tier may take to land a pass's jobs before the test fails."""


def tiered_config(root: Path) -> KVContractConfig:
    """A CPU primary with reuse admission and a file tier, the smallest block layout, call checks off."""
    return KVContractConfig.model_validate(
        {
            "kv_layout": {
                "num_layers": 1,
                "block_tokens": 16,
                "offload_block_tokens": 16,
                "num_kv_heads": 1,
                "head_dim": 8,
                "dtype": "float16",
            },
            "manager": {
                "kind": "tiering",
                "primary": {
                    "capacity": PRIMARY_BLOCKS,
                    "policy": "lru",
                    "admission": {"kind": "reuse", "max_tracker_size": TRACKER_KEYS},
                },
                "secondary": [{"kind": "file", "path": str(root), "capacity": TIER_BLOCKS, "io_threads": 2}],
            },
            "runtime_checks": False,
        }
    )


def settled_bytes(manager: TieringOffloadingManager) -> int:
    """Bytes Python allocations hold once the tier's jobs have landed, after collecting garbage.

    On a loaded machine the tier's I/O threads lag the replay, and the jobs still queued at a
    pass's end (about 300 bytes each) would read as growth.
    """
    deadline = time.monotonic() + SETTLE_SECONDS
    while manager.has_pending_work():
        assert time.monotonic() < deadline, f"tier jobs still in flight after {SETTLE_SECONDS} s"
        manager.end_step()
        time.sleep(0.01)
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def test_replaying_the_trace_again_and_again_keeps_memory_flat(tmp_path: Path) -> None:
    requests: list[TraceRequest] = read_trace(TRACE)[:REQUESTS]
    checks = checks_enabled()
    tracemalloc.start()
    try:
        config = tiered_config(tmp_path / "tier")
        host = torch.zeros((config.host_blocks, config.kv_layout.offload_block_bytes), dtype=torch.uint8)
        manager = build_manager(config, host_blocks=host)
        assert isinstance(manager, FilterReusedOffloadingManager)
        assert isinstance(manager.inner, TieringOffloadingManager)
        try:
            for _ in range(WARM_UP_PASSES):
                replay(manager, requests)
            baseline = settled_bytes(manager.inner)
            growth: list[int] = []
            admitted: list[int] = []
            hits: list[int] = []
            for _ in range(MEASURED_PASSES):
                hits.append(replay(manager, requests).hit_blocks)
                growth.append(settled_bytes(manager.inner) - baseline)
                admitted.append(len(manager.admitted))
            promoted = manager.inner.stats().tiers[0].promoted
        finally:
            manager.shutdown()
    finally:
        tracemalloc.stop()
        configure(checks=checks)
    assert min(hits) > 0 and promoted > 0, "the soak must exercise hits and tier promotions"
    assert max(admitted) <= PRIMARY_BLOCKS, f"admitted keys per pass {admitted} exceed the primary"
    assert max(growth) < GROWTH_LIMIT_BYTES, f"traced memory grew by {growth} bytes over the passes"
