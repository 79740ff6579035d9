"""``kvcontract simulate``: the simulation of one engine or several sharing tiers, its report, JSON and plot."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kvcontract.arguments import installed_version
from kvcontract.cli.config_command import load_command_config, print_config
from kvcontract.cli.errors import UsageError
from kvcontract.cli.streams import STDOUT, check_distinct, check_writable, writing, wrote

if TYPE_CHECKING:
    from kvcontract.config import KVContractConfig
    from kvcontract.metrics import MetricsCollector

__all__ = ["run_simulate"]


def run_simulate(options: argparse.Namespace) -> int:
    """``kvcontract simulate``: check the options and outputs, run, report; ``--engines`` hands over to the multi-engine run."""
    from kvcontract.sim.report import print_report, require_plotting, write_plot
    from kvcontract.sim.run import check_request_count, run_simulation
    from kvcontract.sim.simulator import DataMismatch

    try:
        check_request_count(options.requests)
    except ValueError as error:
        raise UsageError(f"--{error}") from None
    json_path = None if options.json in (None, STDOUT) else Path(options.json)
    check_distinct({"--json": json_path, "--plot": options.plot})
    if json_path is not None:
        check_writable(json_path, "--json")
    if options.plot is not None:
        if options.plot.suffix.lower() != ".png":
            raise UsageError(f"--plot writes a PNG file: give a name ending in .png, got {options.plot}")
        try:
            require_plotting()
        except ImportError as error:
            raise UsageError(f"--plot: {error}") from None
        check_writable(options.plot, "--plot")
    config = load_command_config(options.config, simulation=options.config is None)
    if options.print_config:
        print_config(config)
        return 0
    if options.engines != 1:
        if options.metrics_port is not None:
            raise UsageError("--metrics-port serves one engine's metrics: leave it out with --engines")
        return _simulate_engines(options, config)
    from kvcontract.observe import whatif_observer

    observer = whatif_observer(config)
    with _metrics_served(options.metrics_port) as metrics:
        if metrics is not None and observer is not None:
            metrics.add(observer.source)
        try:
            report = run_simulation(
                config,
                trace=options.trace,
                num_requests=options.requests,
                seed=options.seed,
                metrics=metrics,
                observer=observer,
                source=_source(options),
            )
        except DataMismatch as error:
            print(f"kvcontract: verification failed: {error}", file=sys.stderr)
            return 1
    _publish(options, config, report, lambda heading: print_report(report, heading))
    if options.plot is not None:
        write_plot(report, options.plot)
        wrote("the plot of the run", options.plot)
    return 0


def run_identity(options: argparse.Namespace, config: KVContractConfig) -> dict[str, object]:
    """What names a run in its JSON: the kvcontract version, the config's fingerprint (SHA-256 of the
    config as it ran, defaults filled in, 16 hex digits), the trace or the seed of the built-in
    workload, the requests asked for and the engines."""
    canonical = config.model_dump_json().encode()
    return {
        "kvcontract_version": installed_version(),
        "config_fingerprint": hashlib.sha256(canonical).hexdigest()[:16],
        "trace": None if options.trace is None else str(options.trace),
        "seed": options.seed,
        "requests_asked": options.requests,
        "engines": options.engines,
    }


def _source(options: argparse.Namespace) -> str:
    """What a config error's line starts with: the config file, as ``config validate`` names it."""
    return "config" if options.config is None else str(options.config)


def _say_short_trace(options: argparse.Namespace, served: int) -> None:
    """Say so on standard error when ``--requests`` asked for more requests than the trace holds."""
    if options.requests is not None and served < options.requests:
        print(
            f"kvcontract: --requests {options.requests:,}: the trace holds {served:,} "
            f"request{'s' if served != 1 else ''}, all of them served",
            file=sys.stderr,
        )


@contextmanager
def _metrics_served(port: int | None) -> Generator[MetricsCollector | None, None, None]:
    """A collector served on ``127.0.0.1:port`` while the block runs, or ``None`` without a port."""
    if port is None:
        yield None
        return
    if not 0 <= port <= 65535:
        raise UsageError(f"--metrics-port must be a TCP port (0-65535), got {port}")
    from kvcontract.metrics import MetricsCollector
    from kvcontract.metrics.prometheus import serve_metrics

    collector = MetricsCollector()
    try:
        server = serve_metrics(collector, port)
    except OSError as error:
        raise UsageError(
            f"--metrics-port {port}: cannot serve there ({error.strerror or error}); give a free port, or 0 for any"
        ) from None
    print(f"kvcontract: metrics at http://127.0.0.1:{server.port}/metrics", file=sys.stderr)
    try:
        yield collector
    finally:
        server.stop()


def _simulate_engines(options: argparse.Namespace, config: KVContractConfig) -> int:
    """``simulate --engines N``: the engines share the config's tiers (a Redis tier makes cross-engine hits)."""
    from kvcontract.sim.multi_engine import (
        MAX_ENGINES,
        print_engines_report,
        run_engines_simulation,
    )
    from kvcontract.sim.simulator import DataMismatch

    if not 1 <= options.engines <= MAX_ENGINES:
        raise UsageError(f"--engines must be at least 1 and at most {MAX_ENGINES}, got {options.engines}")
    if options.plot is not None:
        raise UsageError("--plot draws one engine's run: leave it out with --engines")
    try:
        report = run_engines_simulation(
            config,
            options.engines,
            trace=options.trace,
            num_requests=options.requests,
            seed=options.seed,
            source=_source(options),
        )
    except DataMismatch as error:
        print(f"kvcontract: verification failed: {error}", file=sys.stderr)
        return 1
    _publish(options, config, report, lambda heading: print_engines_report(report, heading))
    return 0


class _Report(Protocol):
    """What :func:`_publish` reads of a run's report, one engine's or several's."""

    @property
    def requests(self) -> int: ...

    def summary(self) -> dict[str, object]: ...


def _publish(
    options: argparse.Namespace,
    config: KVContractConfig,
    report: _Report,
    print_table: Callable[[Sequence[str]], None],
) -> None:
    """Say so when the trace ran short, write the figures to ``--json``'s file, and print them:
    as JSON with ``--json -``, else ``print_table`` under the run's heading."""
    from kvcontract.sim.output import write_text
    from kvcontract.sim.report import run_heading

    _say_short_trace(options, report.requests)
    document = {**report.summary(), "run": run_identity(options, config)}
    if options.json not in (None, STDOUT):
        write_text(Path(options.json), json.dumps(document) + "\n")
        wrote("the figures as JSON", Path(options.json))
    with writing():
        if options.json == STDOUT:
            print(json.dumps(document))
        else:
            print_table(
                run_heading(
                    config, trace=options.trace, requests=report.requests, seed=options.seed, engines=options.engines
                )
            )
