"""Metrics: what the collector reads from real components, and a real scrape over loopback."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from kvcontract import BlockIdsSpec, GPULoadStoreSpec, ReqContext, make_offload_key
from kvcontract.managers import CPUOffloadingManager, FilterReusedOffloadingManager
from kvcontract.metrics import MeteredWorker, MetricSample, MetricsCollector, manager_source
from kvcontract.transfer import TorchOffloadingWorker
from tests.metrics.support import scrape


def _by_name(samples: list[MetricSample]) -> dict[str, MetricSample]:
    return {sample.name: sample for sample in samples}


def test_a_manager_reports_usage_hits_misses_and_evictions_under_vllm_and_own_names() -> None:
    manager = CPUOffloadingManager(2, "lru")
    context = ReqContext("r")
    keys = [make_offload_key(bytes([n])) for n in range(3)]
    for key in keys:
        output = manager.prepare_store([key], context)
        assert output is not None
        manager.complete_store(output.keys_to_store, context)
    manager.lookup(keys[2], context)
    manager.lookup(keys[0], context)
    collector = MetricsCollector()
    collector.add(manager_source(manager, policy="lru"))
    samples = _by_name(collector.collect())
    assert samples["kvcontract_host_usage"].value == 1.0
    assert samples["vllm:kv_offload_cpu_cache_usage_perc"].value == 0.0  # nothing in flight
    assert samples["kvcontract_hits_total"].value == 1
    assert samples["kvcontract_misses_total"].value == 1
    assert samples["kvcontract_evictions_total"].value == 1
    assert samples["kvcontract_hits_total"].labels == {"policy": "lru"}


def test_host_gauges_count_what_transfers_hold_as_vllm_does() -> None:
    manager = CPUOffloadingManager(4, "lru")
    context = ReqContext("r")
    keys = [make_offload_key(bytes([n])) for n in range(3)]
    output = manager.prepare_store(keys[:2], context)
    assert output is not None
    manager.complete_store(output.keys_to_store, context)
    assert manager.prepare_store(keys[2:], context) is not None
    manager.prepare_load(keys[:1], context)
    collector = MetricsCollector()
    collector.add(manager_source(manager))
    samples = _by_name(collector.collect())
    assert samples["vllm:kv_offload_cpu_cache_write_usage_perc"].value == 0.25  # one store in flight
    assert samples["vllm:kv_offload_cpu_cache_read_usage_perc"].value == 0.25  # one block being loaded
    assert samples["vllm:kv_offload_cpu_cache_usage_perc"].value == 0.5
    assert samples["kvcontract_host_usage"].value == 0.75


def test_reuse_admission_counts_skipped_stores_under_vllms_name() -> None:
    manager = FilterReusedOffloadingManager(CPUOffloadingManager(4, "lru"))
    assert manager.prepare_store([make_offload_key(b"a"), make_offload_key(b"b")], ReqContext("r")) is not None
    collector = MetricsCollector()
    collector.add(manager_source(manager))
    samples = _by_name(collector.collect())
    assert samples["vllm:kv_offload_stores_skipped"].value == 2
    assert samples["kvcontract_failed_store_blocks_total"].value == 0


def test_the_prefixes_are_configurable() -> None:
    collector = MetricsCollector(vllm_prefix="engine1:", own_prefix="kvc1_")
    collector.add(manager_source(CPUOffloadingManager(4, "lru")))
    names = {sample.name for sample in collector.collect()}
    assert "engine1:kv_offload_cpu_cache_usage_perc" in names and "kvc1_hits_total" in names


def test_a_metered_worker_counts_bytes_and_sizes_of_finished_jobs() -> None:
    caches = [torch.zeros(8, 1024, dtype=torch.uint8)]
    worker = MeteredWorker(TorchOffloadingWorker(caches, num_host_blocks=8))
    try:
        assert worker.submit_store(1, GPULoadStoreSpec([0, 1]), BlockIdsSpec([3, 4]))
        worker.wait([1])
        finished = worker.get_finished()
        assert [result.success for result in finished] == [True]
        samples = _by_name(list(worker.source()))
        assert samples["kv_offload_store_bytes"].value == 2048
        assert samples["kv_offload_load_bytes"].value == 0
        histogram = samples["kv_offload_store_size"]
        assert histogram.buckets[0] == (1e6, 1) and histogram.buckets[-1] == (float("inf"), 1)
    finally:
        worker.shutdown()


def test_a_scrape_over_loopback_parses_as_prometheus_exposition() -> None:
    collector = MetricsCollector()
    collector.add(manager_source(CPUOffloadingManager(4, "arc"), policy="arc"))
    families = scrape(collector)
    assert families["vllm:kv_offload_cpu_cache_usage_perc"].type == "gauge"
    assert families["kvcontract_hits"].type == "counter"
    assert families["kvcontract_hits"].samples[0].labels == {"policy": "arc"}


def test_import_kvcontract_pulls_no_optional_dependency() -> None:
    code = (
        "import sys, kvcontract, kvcontract.metrics, kvcontract.managers, kvcontract.tiers, kvcontract.sim;"
        "print(sorted(m for m in ('prometheus_client', 'redis', 'vllm', 'matplotlib') if m in sys.modules))"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "[]"


def test_a_refused_job_leaves_nothing_behind_in_the_metered_worker() -> None:
    caches = [torch.zeros(4, 64, dtype=torch.uint8)]
    worker = MeteredWorker(TorchOffloadingWorker(caches, num_host_blocks=4))
    try:
        with pytest.raises(ValueError):
            worker.submit_store(1, GPULoadStoreSpec([0]), BlockIdsSpec([99]))
        assert worker.get_finished() == []
        assert worker.pending_jobs == 0
    finally:
        worker.shutdown()
