"""The CUDA engine's copy plan (device gather, one crossing, host scatter), run on CPU tensors.

On CPU the plan's steps run synchronously, so both ways across the bus (kernels on a
device view of host memory, and memcpy runs) are checked here without a GPU. A tiny
staging size makes jobs go through staging in several steps.
"""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from hypothesis import given, settings

from kvcontract import GPULoadStoreSpec
from kvcontract.transfer import KVCacheLayout, staged_copy
from kvcontract.transfer.copy_engine import Direction
from kvcontract.transfer.mapping import BlockMapping
from kvcontract.transfer.staged_copy import StagedCopier
from tests.transfer.support import (
    Scenario,
    assert_loaded,
    host_expected_after_store,
    scenario_kv,
    scenarios,
)


def copier(
    kv: list[list[torch.Tensor]],
    scenario: Scenario,
    generator: torch.Generator,
    *,
    zero_copy: bool,
) -> StagedCopier:
    """A copier over ``kv`` and a host buffer of random bytes."""
    layout = KVCacheLayout.of(kv, kv_first=scenario.kv_first, blocks_per_offload_block=scenario.k)
    shape = (scenario.num_host_blocks * scenario.k, layout.bytes_per_gpu_block)
    rows = torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator)
    return StagedCopier(layout, rows, rows if zero_copy else None)


def mapping(copier: StagedCopier, scenario: Scenario, gpu_ids: tuple[int, ...], *, to_gpu: bool) -> BlockMapping:
    """The scenario's job with GPU blocks ``gpu_ids``."""
    return BlockMapping.of(
        copier.layout,
        GPULoadStoreSpec(gpu_ids, scenario.sizes, scenario.starts),
        scenario.host_ids,
        num_host_blocks=scenario.num_host_blocks,
        to_gpu=to_gpu,
    )


@pytest.mark.parametrize("zero_copy", [True, False], ids=["device-view", "memcpy-runs"])
@pytest.mark.parametrize("staging_bytes", [staged_copy.STAGING_BYTES, 40], ids=["one-step", "steps"])
@settings(max_examples=40, deadline=None)
@given(scenario=scenarios())
def test_the_plan_stores_and_loads_bytes_exactly(zero_copy: bool, staging_bytes: int, scenario: Scenario) -> None:
    generator = torch.Generator().manual_seed(scenario.seed)
    source = scenario_kv(scenario, "cpu", generator)
    target = scenario_kv(scenario, "cpu", generator)
    target_before = [[t.clone() for t in group] for group in target]
    storer = copier(source, scenario, generator, zero_copy=zero_copy)
    loader = copier(target, scenario, generator, zero_copy=zero_copy)
    before = storer.host_rows.clone()
    with mock.patch.object(staged_copy, "STAGING_BYTES", staging_bytes):
        stored = mapping(storer, scenario, scenario.stored, to_gpu=False)
        storer.copy(Direction.STORE, storer.prepare(stored))
        expected = host_expected_after_store(before, source, scenario)
        assert torch.equal(storer.host_rows, expected)
        loader.host_rows.copy_(storer.host_rows)
        loaded = mapping(loader, scenario, scenario.loaded, to_gpu=True)
        loader.copy(Direction.LOAD, loader.prepare(loaded))
    assert torch.equal(loader.host_rows, expected)
    assert_loaded(target, target_before, source, scenario)
