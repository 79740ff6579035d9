"""Several simulated engines, each with its own KV cache and host memory, sharing the tiers one config names.

With a ``redis`` tier every engine connects to the same server, so a block one engine
stored is a hit for the others. Requests are dealt round-robin and served strictly in
trace order: engine ``i`` serves request ``g`` when ``g % engines == i``, each engine on
its own thread, handing the turn to the next after every request (the engines'
background stores and tier I/O keep running meanwhile, as on separate machines). Every
loaded block is verified byte for byte, whichever engine stored it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from kvcontract.assembly import apply_runtime_checks
from kvcontract.config import KVContractConfig
from kvcontract.sim.output import progress, show_line, show_table
from kvcontract.sim.report import check_verdict
from kvcontract.sim.run import simulation_requests
from kvcontract.sim.simulator import EngineSimulator, SimulationReport, build_engine

__all__ = ["MAX_ENGINES", "MultiEngineReport", "print_engines_report", "run_engines", "run_engines_simulation"]

MAX_ENGINES = 64
_PROGRESS_SECONDS = 0.1
"""How often the progress bar moves, and how soon an interrupt is taken, while the engines run."""
"""Engines of one run: each holds a simulated KV cache and host memory in this process."""


@dataclass(frozen=True)
class MultiEngineReport:
    """The engines' reports, and the hit ratio over all requests."""

    engines: tuple[SimulationReport, ...] = field(repr=False)
    requests: int
    blocks: int
    hit_blocks: int
    hit_ratio: float
    verified_blocks: int
    failed_stores: int
    failed_loads: int
    seconds: float

    def summary(self) -> dict[str, object]:
        """The figures as a JSON-ready mapping, each engine's without its progress samples."""
        return {
            "engines": [engine.summary() for engine in self.engines],
            "requests": self.requests,
            "blocks": self.blocks,
            "hit_blocks": self.hit_blocks,
            "hit_ratio": self.hit_ratio,
            "verified_blocks": self.verified_blocks,
            "failed_stores": self.failed_stores,
            "failed_loads": self.failed_loads,
            "identity_mismatches": sum(engine.identity_mismatches for engine in self.engines),
            "seconds": self.seconds,
        }


class _Aborted(Exception):
    """Another engine failed: this one stops at its next turn."""


class _Turns:
    """Whose turn it is: the index of the next request of the trace to serve."""

    def __init__(self, engines: int) -> None:
        self._engines = engines
        self._next = 0
        self._failed = False
        self._changed = threading.Condition()

    def wait_for(self, request: int) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._next == request or self._failed)
            if self._failed:
                raise _Aborted

    def served(self, request: int) -> None:
        with self._changed:
            self._next = request + 1
            self._changed.notify_all()

    def fail(self) -> None:
        with self._changed:
            self._failed = True
            self._changed.notify_all()

    @property
    def done(self) -> int:
        """How many requests of the trace have been served."""
        return self._next


def run_engines(config: KVContractConfig, requests: Sequence[Sequence[int]], engines: int) -> MultiEngineReport:
    """Serve ``requests`` round-robin on ``engines`` engines built from ``config``; the first error is raised."""
    if not 1 <= engines <= MAX_ENGINES:
        raise ValueError(f"engines must be between 1 and {MAX_ENGINES}, got {engines}")
    longest = max(map(len, requests), default=1)
    simulators = [EngineSimulator(config, build_engine(config, longest)) for _ in range(engines)]
    turns = _Turns(engines)
    reports: list[SimulationReport | None] = [None] * engines
    errors: list[BaseException] = []

    def serve(index: int) -> None:
        share = requests[index::engines]

        def after(done: int) -> None:
            turns.served(index + (done - 1) * engines)
            if done < len(share):
                turns.wait_for(index + done * engines)

        try:
            if share:
                turns.wait_for(index)
            reports[index] = simulators[index].run(share, on_request=after)
        except _Aborted:
            return
        except BaseException as error:
            errors.append(error)
            turns.fail()

    threads = [threading.Thread(target=serve, args=(i,), name=f"engine-{i}") for i in range(engines)]
    with progress(f"simulating {engines} engines", len(requests)) as advance:
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():  # joined a little at a time: an interrupt reaches this thread
                    thread.join(_PROGRESS_SECONDS)
                    advance(turns.done)
        except BaseException:
            turns.fail()  # the engines stop at their next turn
            raise
        if errors:
            raise errors[0]
    done = tuple(report for report in reports if report is not None)
    blocks = sum(report.blocks for report in done)
    hits = sum(report.hit_blocks for report in done)
    return MultiEngineReport(
        engines=done,
        requests=sum(report.requests for report in done),
        blocks=blocks,
        hit_blocks=hits,
        hit_ratio=hits / blocks if blocks else 0.0,
        verified_blocks=sum(report.verified_blocks for report in done),
        failed_stores=sum(report.failed_stores for report in done),
        failed_loads=sum(report.failed_loads for report in done),
        seconds=max((report.seconds for report in done), default=0.0),
    )


def run_engines_simulation(
    config: KVContractConfig,
    engines: int,
    *,
    trace: Path | None = None,
    num_requests: int | None = None,
    seed: int = 0,
    source: str = "config",
) -> MultiEngineReport:
    """:func:`run_engines` on the trace's requests (the first ``num_requests``) or the built-in workload's;
    ``source`` (the config's file) starts the line of a machine check the config fails."""
    if not 1 <= engines <= MAX_ENGINES:
        raise ValueError(f"engines must be between 1 and {MAX_ENGINES}, got {engines}")
    requests = simulation_requests(
        config, trace=trace, num_requests=num_requests, seed=seed, engines=engines, source=source
    )
    apply_runtime_checks(config)
    return run_engines(config, requests, engines)


def print_engines_report(
    report: MultiEngineReport, heading: Sequence[str] = (), console: Console | None = None
) -> None:
    """``heading`` (what ran), one row per engine and one for all of them: requests, blocks, hits,
    verified blocks, failures; then the verdict of the byte-for-byte check."""
    rows = [
        (
            str(index),
            f"{engine.requests:,}",
            f"{engine.blocks:,}",
            f"{engine.hit_ratio:.4f}",
            f"{engine.verified_blocks:,}",
            f"{engine.failed_stores} / {engine.failed_loads}",
            f"{sum(tier.promoted for tier in engine.tiers):,}",
        )
        for index, engine in enumerate(report.engines)
    ]
    rows.append(
        (
            "all",
            f"{report.requests:,}",
            f"{report.blocks:,}",
            f"{report.hit_ratio:.4f}",
            f"{report.verified_blocks:,}",
            f"{report.failed_stores} / {report.failed_loads}",
            "",
        )
    )
    out = console or Console()
    for line in heading:
        show_line(line, out)
    columns = ("engine", "requests", "blocks", "hit ratio", "verified", "failed stores / loads", "tier hits")
    shared = "sharing their tiers" if any(engine.tiers for engine in report.engines) else "with no tier to share"
    show_table(f"{len(report.engines)} engines {shared}", columns, rows, left=(), console=out)
    show_line(check_verdict(report.verified_blocks), out)
