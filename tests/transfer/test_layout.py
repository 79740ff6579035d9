"""Registering engine KV-cache tensors: layouts, dtypes, groups, and the errors for bad input."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kvcontract.transfer import KVCacheLayout


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int8, torch.float8_e4m3fn])
def test_blocks_on_dim_0_become_byte_rows(dtype: torch.dtype) -> None:
    kv = [torch.zeros((5, 16, 2, 8), dtype=dtype) for _ in range(3)]
    layout = KVCacheLayout.of(kv)
    (group,) = layout.groups
    item = kv[0].element_size()
    assert [p.block_bytes for p in group.planes] == [16 * 2 * 8 * item] * 3
    assert group.num_blocks == 5
    assert group.offsets == (0, 256 * item, 512 * item)
    assert layout.bytes_per_gpu_block == group.bytes_per_block == 768 * item


def test_kv_first_splits_each_tensor_into_k_and_v_planes() -> None:
    tensor = torch.arange(2 * 4 * 3, dtype=torch.int32).view(2, 4, 3)
    (group,) = KVCacheLayout.of([tensor], kv_first=True).groups
    assert len(group.planes) == 2 and group.num_blocks == 4
    assert torch.equal(group.planes[0].rows[1], tensor[0, 1].view(torch.uint8))
    assert torch.equal(group.planes[1].rows[2], tensor[1, 2].view(torch.uint8))


def test_views_share_memory_with_the_engine_tensors() -> None:
    tensor = torch.zeros((3, 4), dtype=torch.float32)
    (group,) = KVCacheLayout.of([tensor]).groups
    group.planes[0].rows[2].fill_(0xFF)
    assert torch.isnan(tensor[2]).all() and (tensor[:2] == 0).all()


def test_padded_blocks_keep_their_stride() -> None:
    padded = torch.zeros((6, 10), dtype=torch.float16)[:, :8]
    (plane,) = KVCacheLayout.of([padded]).groups[0].planes
    assert (plane.block_bytes, plane.row_stride) == (16, 20)


def test_several_groups_use_the_largest_block_as_host_row() -> None:
    small = [torch.zeros((4, 8), dtype=torch.uint8)]
    large = [torch.zeros((6, 8), dtype=torch.uint8) for _ in range(3)]
    layout = KVCacheLayout.of([small, large], blocks_per_offload_block=2)
    assert [g.num_blocks for g in layout.groups] == [4, 6]
    assert layout.bytes_per_gpu_block == 24
    assert layout.bytes_per_offload_block == 48


def test_a_scalar_per_block_is_a_one_element_row() -> None:
    (plane,) = KVCacheLayout.of([torch.zeros(7, dtype=torch.float64)]).groups[0].planes
    assert (plane.num_blocks, plane.block_bytes) == (7, 8)


BAD_REGISTRATIONS: list[tuple[Any, bool, str]] = [
    ([], False, "kv_caches is empty"),
    ([[]], False, "group 0 has no tensors"),
    ([torch.zeros(3, 4), [torch.zeros(3, 4)]], False, "kv_caches\\[0\\] must be a list"),
    ([torch.zeros(3, 4), torch.zeros(5, 4)], False, "mixes tensors of \\[3, 5\\] blocks"),
    ([torch.zeros(3, 4, 2).transpose(1, 2)], False, "elements of one block must be contiguous"),
    ([torch.zeros(3, 4)], True, "with kv_first=True each tensor is \\(2, num_blocks"),
    ([torch.zeros(0, 4)], False, "holds no block bytes"),
    ([torch.zeros(3, 4).expand(3, 4)[:, :1].expand(3, 4)], False, "contiguous|overlap"),
    ([torch.tensor(1.0)], False, "is a scalar"),
    (["layer0"], False, "kv_caches\\[0\\] must be a list"),
]


@pytest.mark.parametrize(("kv_caches", "kv_first", "message"), BAD_REGISTRATIONS)
def test_bad_registrations_say_what_is_wrong(kv_caches: Any, kv_first: bool, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        KVCacheLayout.of(kv_caches, kv_first=kv_first)


def test_a_single_tensor_is_not_a_list_of_layers() -> None:
    stacked: Any = torch.zeros(3, 4)
    with pytest.raises(TypeError, match="list of per-layer tensors"):
        KVCacheLayout.of(stacked)


def test_overlapping_blocks_are_refused() -> None:
    overlapping = torch.zeros(10).as_strided((4, 4), (2, 1))
    with pytest.raises(ValueError, match="overlap"):
        KVCacheLayout.of([overlapping])


def test_offload_blocks_hold_at_least_one_gpu_block() -> None:
    with pytest.raises(ValueError, match="blocks_per_offload_block must be at least 1"):
        KVCacheLayout.of([torch.zeros(3, 4)], blocks_per_offload_block=0)
