"""One simulation run: its requests (built-in workload or a trace), a progress bar, the report."""

from __future__ import annotations

from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from kvcontract.config import KVContractConfig
from kvcontract.sim.simulator import EngineSimulator, SimulationReport
from kvcontract.sim.trace import read_trace
from kvcontract.sim.workload import conversation_workload

__all__ = ["DEFAULT_REQUESTS", "run_simulation"]

DEFAULT_REQUESTS = 3000
"""Requests of the built-in workload when no number is given."""


def run_simulation(
    config: KVContractConfig,
    *,
    trace: Path | None = None,
    num_requests: int | None = None,
    seed: int = 0,
    show_progress: bool = True,
) -> SimulationReport:
    """Serve the trace's requests (or the built-in workload's) through ``config``'s components."""
    if trace is None:
        requests = conversation_workload(num_requests or DEFAULT_REQUESTS, seed)
    else:
        requests = [list(request.hash_ids) for request in read_trace(trace)][:num_requests]
    simulator = EngineSimulator(config, max_blocks_per_request=max(map(len, requests), default=1))
    if not show_progress:
        return simulator.run(requests)
    columns = (
        TextColumn(f"simulating on {simulator.device}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task("requests", total=len(requests))
        return simulator.run(requests, on_request=lambda done: progress.update(task, completed=done))
