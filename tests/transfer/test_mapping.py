"""Pairing GPU blocks with host rows, unaligned starts included, and refusing inconsistent specs."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kvcontract import GPULoadStoreSpec
from kvcontract.transfer import KVCacheLayout
from kvcontract.transfer.mapping import BlockMapping

NESTED: Any = [[0, 1]]
"""Block ids nested one level too deep."""


def layout(*num_blocks: int, k: int = 1) -> KVCacheLayout:
    """One tensor of 8-byte blocks per group, with the given block counts."""
    return KVCacheLayout.of([[torch.zeros((n, 8), dtype=torch.uint8)] for n in num_blocks], blocks_per_offload_block=k)


def test_k_gpu_blocks_fill_each_offload_block_after_the_start_index() -> None:
    spec = GPULoadStoreSpec([7, 8, 9, 10, 11], block_indices=[2])
    mapping = BlockMapping.of(layout(12, k=3), spec, [4, 1, 0], num_host_blocks=5, to_gpu=False)
    (group,) = mapping.groups
    assert group.gpu_ids.tolist() == [7, 8, 9, 10, 11]
    assert group.host_rows.tolist() == [4 * 3 + 2, 3, 4, 5, 0]
    assert mapping.nbytes == 5 * 8


def test_groups_take_their_host_blocks_in_turn_and_empty_groups_take_none() -> None:
    spec = GPULoadStoreSpec([1, 2, 3, 0], group_sizes=[2, 0, 2], block_indices=[1, 0, 0])
    mapping = BlockMapping.of(layout(4, 4, 4, k=2), spec, [5, 6, 2], num_host_blocks=8, to_gpu=True)
    assert [g.group for g in mapping.groups] == [0, 2]
    assert [g.host_rows.tolist() for g in mapping.groups] == [[11, 12], [4, 5]]


@pytest.mark.parametrize(
    ("spec", "host_ids", "to_gpu", "message"),
    [
        (GPULoadStoreSpec([0, 1]), [0], False, "1 host blocks given, but .* need 2"),
        (GPULoadStoreSpec([0, 9]), [0, 1], False, "GPU block id of group 0 9 is out of range"),
        (GPULoadStoreSpec([0, 1]), [0, 6], False, "host block id 6 is out of range"),
        (GPULoadStoreSpec([0, 1]), [-1, 2], False, "host block id -1 is out of range"),
        (GPULoadStoreSpec([0, 1]), [3, 3], False, "writes host blocks \\[3, 3\\] more than once"),
        (GPULoadStoreSpec([2, 2]), [0, 1], True, "writes GPU blocks \\[2, 2\\] of group 0 more"),
        (GPULoadStoreSpec([0], block_indices=[1]), [0], False, "block_indices\\[0\\] = 1 is out"),
        (GPULoadStoreSpec([0, 1], group_sizes=[1, 1]), [0, 1], False, "has 2 KV-cache groups"),
        (GPULoadStoreSpec(NESTED), [0], False, "flat sequence of integers"),
    ],
)
def test_inconsistent_specs_are_refused_with_the_reason(
    spec: GPULoadStoreSpec, host_ids: list[int], to_gpu: bool, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        BlockMapping.of(layout(4), spec, host_ids, num_host_blocks=6, to_gpu=to_gpu)


def test_a_store_may_read_one_gpu_block_twice_and_a_load_may_read_one_host_block_twice() -> None:
    kv = layout(4)
    store = BlockMapping.of(kv, GPULoadStoreSpec([2, 2]), [0, 1], num_host_blocks=2, to_gpu=False)
    load = BlockMapping.of(kv, GPULoadStoreSpec([0, 1]), [1, 1], num_host_blocks=2, to_gpu=True)
    assert store.nbytes == load.nbytes == 16
