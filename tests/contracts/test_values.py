"""Value types: defaults, validation with clear messages, per-request typed state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

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


NOT_INTEGERS: list[Any] = [1.0, True, "1", None, np.float32(1), np.bool_(True), torch.tensor(1)]
"""Values that an id or size must never be taken for, though Python or numpy would coerce most."""
NEGATIVE_ARRAY: Any = np.array([-2])
NEGATIVE_TENSOR: Any = torch.tensor([0, -1])


@pytest.mark.parametrize("bad", NOT_INTEGERS, ids=repr)
def test_gpu_spec_group_sizes_and_block_indices_are_integers(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"GPULoadStoreSpec\.group_sizes must be a flat sequence of integers"):
        GPULoadStoreSpec([1], group_sizes=[bad])
    with pytest.raises(ValueError, match=r"GPULoadStoreSpec\.block_indices must be a flat sequence of integers"):
        GPULoadStoreSpec([1], block_indices=[bad])


def test_gpu_spec_refuses_negative_group_sizes_that_add_up() -> None:
    with pytest.raises(ValueError, match=r"GPULoadStoreSpec\.group_sizes holds -1: give values of 0 or more"):
        GPULoadStoreSpec([1, 2], group_sizes=[3, -1])
    with pytest.raises(ValueError, match=r"GPULoadStoreSpec\.block_indices holds -2"):
        GPULoadStoreSpec([1], block_indices=NEGATIVE_ARRAY)


@pytest.mark.parametrize("bad", NOT_INTEGERS, ids=repr)
def test_tier_job_host_block_ids_are_integers(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"TierJob 3: host_block_ids must be a flat sequence of integers"):
        TierJob(3, [make_offload_key(b"a"), make_offload_key(b"b")], [0, bad])


@pytest.mark.parametrize(
    "ids",
    [np.array([0.0, 1.0]), torch.tensor([0.0, 1.0]), torch.tensor([True, False]), np.array([[0, 1]])],
    ids=["numpy-float", "torch-float", "torch-bool", "2-d"],
)
def test_tier_job_refuses_arrays_of_other_dtypes_or_shapes(ids: Any) -> None:
    with pytest.raises(ValueError, match=r"host_block_ids must be a flat sequence of integers, got"):
        TierJob(1, [make_offload_key(b"a"), make_offload_key(b"b")], ids)


def test_tier_job_refuses_negative_host_block_ids() -> None:
    keys = [make_offload_key(b"a"), make_offload_key(b"b")]
    with pytest.raises(ValueError, match="host_block_ids holds -1"):
        TierJob(1, keys, [0, -1])
    with pytest.raises(ValueError, match="host_block_ids holds -1"):
        TierJob(1, keys, NEGATIVE_TENSOR)


@pytest.mark.parametrize(
    "ids",
    [[0, 1], (np.int64(0), np.uint8(1)), np.array([0, 1], dtype=np.int32), torch.tensor([0, 1]), range(2)],
    ids=["int", "numpy-scalars", "numpy-array", "torch-tensor", "range"],
)
def test_integer_ids_of_every_kind_are_accepted(ids: Any) -> None:
    job = TierJob(1, [make_offload_key(b"a"), make_offload_key(b"b")], ids)
    assert [int(i) for i in job.host_block_ids] == [0, 1]
    spec = GPULoadStoreSpec([5], group_sizes=ids, block_indices=ids)
    assert [int(i) for i in spec.group_sizes] == [0, 1]
