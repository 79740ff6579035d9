"""One simulation run: its requests (built-in workload or a trace), a progress bar, the report.

The run is bounded before anything is allocated: at most ``MAX_REQUESTS`` requests, and the
simulated KV cache (two request regions on the device) with the host buffer must fit in the
machine's memory; a config that the components refuse while being built is a ``ConfigError``.
"""

from __future__ import annotations

from pathlib import Path

from kvcontract.assembly import apply_runtime_checks
from kvcontract.config import ConfigError, KVContractConfig, check_machine
from kvcontract.metrics import MetricsCollector
from kvcontract.sim.observer import RequestObserver
from kvcontract.sim.output import progress
from kvcontract.sim.simulator import EngineSimulator, SimulationReport, build_engine
from kvcontract.sim.trace import read_simulation_requests
from kvcontract.sim.workload import conversation_workload

__all__ = ["DEFAULT_REQUESTS", "MAX_REQUESTS", "check_request_count", "run_simulation", "simulation_requests"]

DEFAULT_REQUESTS = 3000
"""Requests of the built-in workload when no number is given."""
MAX_REQUESTS = 1_000_000
"""Requests of one run: the requests are held in memory while they are served."""


def run_simulation(
    config: KVContractConfig,
    *,
    trace: Path | None = None,
    num_requests: int | None = None,
    seed: int = 0,
    show_progress: bool = True,
    metrics: MetricsCollector | None = None,
    observer: RequestObserver | None = None,
    source: str = "config",
) -> SimulationReport:
    """Serve the trace's requests (or the built-in workload's) through ``config``'s components.

    With ``metrics``, the manager and the worker (behind a :class:`MeteredWorker`) report to it;
    ``observer`` sees every request's keys (the what-if). ``source`` (the config's file) starts
    the line of a machine check the config fails.
    """
    requests = simulation_requests(config, trace=trace, num_requests=num_requests, seed=seed, source=source)
    apply_runtime_checks(config)
    longest = max(map(len, requests), default=1)
    try:
        parts = build_engine(config, longest, metrics=metrics)
    except ValueError as error:  # a component refused what the config describes
        raise ConfigError("config", [str(error)]) from None
    simulator = EngineSimulator(config, parts, observer=observer)
    if not show_progress:
        return simulator.run(requests)
    with progress(f"simulating on {simulator.device}", len(requests)) as advance:
        return simulator.run(requests, on_request=advance)


def check_request_count(num_requests: int | None) -> None:
    """Refuse a number of requests outside ``[1, MAX_REQUESTS]`` (``None``: the default count)."""
    if num_requests is not None and not 1 <= num_requests <= MAX_REQUESTS:
        raise ValueError(f"requests must be at least 1 and at most {MAX_REQUESTS}, got {num_requests}")


def simulation_requests(
    config: KVContractConfig,
    *,
    trace: Path | None,
    num_requests: int | None,
    seed: int,
    engines: int = 1,
    source: str = "config",
) -> list[list[int]]:
    """The run's requests (the trace's first ``num_requests``, or the built-in workload's), once
    ``config`` with ``engines`` engines is known to fit this machine for requests that long; the
    machine check is ``config validate``'s, its lines starting with ``source``."""
    check_request_count(num_requests)
    check_machine(config, source)
    if trace is None:
        requests = conversation_workload(num_requests or DEFAULT_REQUESTS, seed)
    else:
        requests = read_simulation_requests(trace, num_requests, MAX_REQUESTS)
    check_machine(config, "simulate", longest_request=max(map(len, requests), default=1), engines=engines)
    return requests
