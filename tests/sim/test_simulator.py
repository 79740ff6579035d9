"""The simulation engine's byte-for-byte check: a corrupted host block fails the run.

The third request reuses the first one's GPU region, so its store has landed by then.
"""

from __future__ import annotations

import pytest

from kvcontract import GPULoadStoreSpec, LoadStoreSpec
from kvcontract.config import load_config
from kvcontract.sim.defaults import SIMULATION_DEFAULTS
from kvcontract.sim.simulator import DataMismatch, EngineSimulator
from kvcontract.transfer import TorchOffloadingWorker

REQUESTS = [[1, 2, 3], [9], [1, 2, 3, 4]]


def simulator() -> EngineSimulator:
    return EngineSimulator(load_config(environ={}, base=SIMULATION_DEFAULTS), max_blocks_per_request=4)


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
