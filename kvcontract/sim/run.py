"""One simulation run: its requests (built-in workload or a trace), a progress bar, the report.

The run is bounded before anything is allocated: at most ``MAX_REQUESTS`` requests, and the
simulated KV cache (two request regions on the device) with the host buffer must fit in the
machine's memory; a config that the components refuse while being built is a ``ConfigError``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ByteSize

from kvcontract.config import ConfigError, CPUManagerConfig, KVContractConfig, check_machine, physical_memory_bytes
from kvcontract.metrics import MeteredWorker, MetricsCollector, manager_source
from kvcontract.sim.observer import RequestObserver
from kvcontract.sim.output import progress
from kvcontract.sim.simulator import EngineSimulator, SimulationReport, resolve_device
from kvcontract.sim.trace import read_simulation_requests
from kvcontract.sim.workload import conversation_workload

__all__ = ["DEFAULT_REQUESTS", "MAX_REQUESTS", "run_simulation"]

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
) -> SimulationReport:
    """Serve the trace's requests (or the built-in workload's) through ``config``'s components.

    With ``metrics``, the manager and the worker (behind a :class:`MeteredWorker`) report to it;
    ``observer`` sees every request's keys (the what-if).
    """
    if num_requests is not None and not 1 <= num_requests <= MAX_REQUESTS:
        raise ValueError(f"num_requests must be between 1 and {MAX_REQUESTS}, got {num_requests}")
    check_machine(config)
    if trace is None:
        requests = conversation_workload(num_requests or DEFAULT_REQUESTS, seed)
    else:
        requests = read_simulation_requests(trace, num_requests, MAX_REQUESTS)
    longest = max(map(len, requests), default=1)
    _check_memory(config, longest)
    try:
        simulator = EngineSimulator(config, max_blocks_per_request=longest, observer=observer)
    except ValueError as error:  # a component refused what the config describes
        raise ConfigError("config", [str(error)]) from None
    if metrics is not None:
        metered = MeteredWorker(simulator.worker)
        simulator.worker = metered
        metrics.add(manager_source(simulator.manager, policy=_primary_policy(config)))
        metrics.add(metered.source)
    if not show_progress:
        return simulator.run(requests)
    with progress(f"simulating on {simulator.device}", len(requests)) as advance:
        return simulator.run(requests, on_request=advance)


def _primary_policy(config: KVContractConfig) -> str:
    manager = config.manager
    primary = manager if isinstance(manager, CPUManagerConfig) else manager.primary
    return primary.policy.kind


def _check_memory(config: KVContractConfig, longest: int) -> None:
    """Refuse a run whose simulated KV cache and host buffer do not fit in this machine's memory."""
    block = config.kv_layout.offload_block_bytes
    kv_cache = 2 * max(1, longest) * block
    needed = kv_cache + config.host_blocks * block
    device = resolve_device(config.transfer.device)
    if device.type == "cuda":
        import torch

        _, total = torch.cuda.mem_get_info(device)
        if kv_cache > total:
            raise ConfigError(
                "simulate",
                [f"the simulated KV cache ({_size(kv_cache)} for requests of {longest} blocks) is more "
                 f"than {device}'s {_size(total)}"],
            )
        needed -= kv_cache
    memory = physical_memory_bytes()
    if needed > memory:
        raise ConfigError(
            "simulate",
            [f"host buffer and simulated KV cache ({_size(needed)}, requests of up to {longest} blocks) "
             f"are more than this machine's {_size(memory)} of physical memory"],
        )


def _size(count: int) -> str:
    return ByteSize(count).human_readable()
