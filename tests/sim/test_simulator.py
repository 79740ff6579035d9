"""The simulation engine: its byte-for-byte check (a corrupted host block fails the run), and
figures that a seed fixes, however the worker's copies are timed.

The third request reuses the first one's GPU region, so its store has landed by then.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import replace

import pytest
from typing_extensions import override

from kvcontract import GPULoadStoreSpec, LoadStoreSpec, OffloadingWorker, TransferResult
from kvcontract.config import load_config
from kvcontract.metrics import MetricsCollector
from kvcontract.sim.defaults import SIMULATION_DEFAULTS
from kvcontract.sim.run import run_simulation
from kvcontract.sim.simulator import DataMismatch, EngineSimulator, SimulationReport, build_engine
from kvcontract.sim.workload import conversation_workload
from kvcontract.transfer import TorchOffloadingWorker

REQUESTS = [[1, 2, 3], [9], [1, 2, 3, 4]]


def simulator() -> EngineSimulator:
    config = load_config(environ={}, base=SIMULATION_DEFAULTS)
    return EngineSimulator(config, build_engine(config, 4))


def test_intact_blocks_are_verified() -> None:
    report = simulator().run(REQUESTS)
    assert report.hit_blocks == 3
    assert report.verified_blocks == 3


def test_a_corrupted_host_block_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = simulator()
    worker = engine.worker
    assert isinstance(worker, TorchOffloadingWorker)
    submit_load = worker.submit_load

    def corrupt_then_load(job_id: int, src: LoadStoreSpec, dst: GPULoadStoreSpec) -> bool:
        worker.host_buffer.bitwise_not_()
        return submit_load(job_id, src, dst)

    monkeypatch.setattr(worker, "submit_load", corrupt_then_load)
    with pytest.raises(DataMismatch, match="differs from the block that was stored"):
        engine.run(REQUESTS)


class _TimedWorker(OffloadingWorker):
    """Reports finished jobs at moments a seeded generator picks: at one ``get_finished`` all its
    jobs have landed, at another none that no ``wait`` named. That is the freedom a real worker
    has, whose copies land on thread timing."""

    def __init__(self, inner: OffloadingWorker, seed: int) -> None:
        self._inner = inner
        self._random = random.Random(seed)
        self._submitted: set[int] = set()
        self._held: dict[int, TransferResult] = {}
        self._waited: set[int] = set()

    @override
    def submit_store(self, job_id: int, src: GPULoadStoreSpec, dst: LoadStoreSpec) -> bool:
        self._submitted.add(job_id)
        return self._inner.submit_store(job_id, src, dst)

    @override
    def submit_load(self, job_id: int, src: LoadStoreSpec, dst: GPULoadStoreSpec) -> bool:
        self._submitted.add(job_id)
        return self._inner.submit_load(job_id, src, dst)

    @override
    def get_finished(self) -> list[TransferResult]:
        quick = self._random.random() < 0.5
        if quick:
            self._inner.wait(self._submitted)
        for result in self._inner.get_finished():
            self._held[result.job_id] = result
            self._submitted.discard(result.job_id)
        due = [job for job in self._held if quick or job in self._waited]
        self._waited.difference_update(due)
        return [self._held.pop(job) for job in due]

    @override
    def wait(self, job_ids: Collection[int]) -> None:
        self._inner.wait(job_ids)
        self._waited.update(job_ids)

    @override
    def shutdown(self) -> None:
        self._inner.shutdown()


def _counts(report: SimulationReport) -> dict[str, object]:
    """The report's figures that count what happened, without the times it took."""
    timed = {"seconds", "transfer_gbps", "manager_us_per_block"}
    return {name: value for name, value in report.summary().items() if name not in timed}


def test_a_seeded_run_gives_the_same_counts_whenever_the_worker_reports() -> None:
    requests = conversation_workload(150, seed=3)
    longest = max(map(len, requests))
    reports: list[dict[str, object]] = []
    for timing in (1, 2, 3):
        config = load_config(environ={}, base=SIMULATION_DEFAULTS)
        parts = build_engine(config, longest)
        engine = EngineSimulator(config, replace(parts, worker=_TimedWorker(parts.worker, seed=timing)))
        reports.append(_counts(engine.run(requests)))
    assert reports[0]["hit_blocks"] != 0
    assert reports[1] == reports[0] and reports[2] == reports[0]


def test_simulate_twice_gives_the_same_counts() -> None:
    config = load_config(environ={}, base=SIMULATION_DEFAULTS)
    first, second = (_counts(run_simulation(config, num_requests=150, seed=5, show_progress=False)) for _ in range(2))
    assert first == second


def test_the_metered_worker_counts_every_byte_the_run_moves() -> None:
    collector = MetricsCollector()
    config = load_config(environ={}, base=SIMULATION_DEFAULTS)
    report = run_simulation(config, num_requests=150, seed=5, show_progress=False, metrics=collector)
    counted = {sample.name: sample.value for sample in collector.collect()}
    assert report.bytes_stored > 0 and report.bytes_loaded > 0
    assert counted["vllm:kv_offload_store_bytes"] == report.bytes_stored
    assert counted["vllm:kv_offload_load_bytes"] == report.bytes_loaded


def test_a_hybrid_layout_moves_a_host_block_per_key_of_each_group() -> None:
    """Full attention keeps every block, a window of one block the last: each key a host block of one layer."""
    groups = [
        {"kind": "full_attention", "num_layers": 1},
        {"kind": "sliding_window", "num_layers": 1, "window_tokens": 64},
    ]
    base = {**SIMULATION_DEFAULTS, "kv_layout": {"preset": "tiny", "offload_block_tokens": 64, "groups": groups}}
    config = load_config(environ={}, base=base)
    report = EngineSimulator(config, build_engine(config, 4)).run(REQUESTS)
    assert report.blocks == 8 + 3  # 8 blocks of full attention, the last of each request for the window
    # the third request finds the first's 3 full-attention blocks; the window block it needs is its own
    # last (4), not the first request's (3): a window keeps the blocks before each request's end only
    assert report.hit_blocks == 3
    assert report.verified_blocks == report.hit_blocks
    assert report.bytes_loaded == report.hit_blocks * config.kv_layout.offload_block_bytes
