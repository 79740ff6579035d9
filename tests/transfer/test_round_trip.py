"""Byte-exact store and load round trips for random block mappings, against the reference model."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from kvcontract import BlockIdsSpec, GPULoadStoreSpec
from tests.transfer.support import (
    BACKENDS,
    Backend,
    Scenario,
    assert_loaded,
    host_expected_after_store,
    same_bytes,
    scenario_kv,
    scenarios,
)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_store_then_load_round_trips_bytes_exactly(backend: Backend, scenario: Scenario) -> None:
    generator = torch.Generator().manual_seed(scenario.seed)
    kv_first, k = scenario.kv_first, scenario.k
    source = scenario_kv(scenario, backend.device, generator)
    target = scenario_kv(scenario, backend.device, generator)
    source_before = [[t.clone() for t in group] for group in source]
    target_before = [[t.clone() for t in group] for group in target]
    host_blocks = scenario.num_host_blocks
    storer = backend.worker(source, num_host_blocks=host_blocks, k=k, kv_first=kv_first)
    loader = backend.worker(target, num_host_blocks=host_blocks, k=k, kv_first=kv_first)
    try:
        shape = storer.host_buffer.shape
        host_before = torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator)
        storer.host_buffer.copy_(host_before)
        gpu_spec = GPULoadStoreSpec(scenario.stored, scenario.sizes, scenario.starts)
        assert storer.submit_store(1, gpu_spec, BlockIdsSpec(scenario.host_ids))
        storer.wait([1])
        assert [r.success for r in storer.get_finished()] == [True]

        expected = host_expected_after_store(host_before, source, scenario)
        assert torch.equal(storer.host_buffer, expected)
        for group, before in zip(source, source_before):
            assert all(same_bytes(t, b) for t, b in zip(group, before)), "a store changed a source"

        loader.host_buffer.copy_(storer.host_buffer)
        load_spec = GPULoadStoreSpec(scenario.loaded, scenario.sizes, scenario.starts)
        assert loader.submit_load(2, BlockIdsSpec(scenario.host_ids), load_spec)
        loader.wait([2])
        assert [r.success for r in loader.get_finished()] == [True]
        assert torch.equal(loader.host_buffer, expected), "a load changed host memory"

        assert_loaded(target, target_before, source, scenario)
    finally:
        storer.shutdown()
        loader.shutdown()
