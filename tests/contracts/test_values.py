"""Value types: defaults, validation with clear messages, per-request typed state."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kvcontract import (
    BlockStatus,
    GPULoadStoreSpec,
    LookupResult,
    ManagerStats,
    ReqContext,
    TierJob,
    make_offload_key,
)


def test_gpu_spec_defaults_to_one_aligned_group() -> None:
    spec = GPULoadStoreSpec([4, 5, 6])
    assert tuple(spec.group_sizes) == (3,)
    assert tuple(spec.block_indices) == (0,)
    assert spec.medium == "GPU"


def test_gpu_spec_rejects_group_sizes_that_do_not_add_up() -> None:
    with pytest.raises(ValueError, match=r"add up to 2, but there are 3 block_ids"):
        GPULoadStoreSpec([1, 2, 3], group_sizes=[1, 1])


def test_gpu_spec_rejects_block_indices_of_other_length() -> None:
    with pytest.raises(ValueError, match="give one per KV-cache group"):
        GPULoadStoreSpec([1, 2], group_sizes=[1, 1], block_indices=[0])


def test_tier_job_needs_one_host_block_per_key() -> None:
    with pytest.raises(ValueError, match="give one host block per key"):
        TierJob(1, [make_offload_key(b"a")], [])


def test_block_status_is_ready_only_after_store() -> None:
    block = BlockStatus(block_id=7)
    assert not block.is_ready
    block.ref_cnt = 0
    assert block.is_ready


def test_hit_ratio() -> None:
    assert ManagerStats(capacity=1, used=0).hit_ratio == 0.0
    assert ManagerStats(capacity=1, used=0, hits=3, misses=1).hit_ratio == 0.75


@dataclass
class Progress:
    blocks: int


def test_request_state_is_typed_and_replaced() -> None:
    ctx = ReqContext("r1")
    assert ctx.get_state(Progress) is None
    ctx.set_state(Progress(1))
    ctx.set_state(Progress(2))
    state = ctx.get_state(Progress)
    assert state is not None and state.blocks == 2
    assert dict(ctx.params) == {}


def test_lookup_results() -> None:
    assert {r.name for r in LookupResult} == {"MISS", "HIT", "HIT_PENDING", "RETRY"}
