"""The ``kvcontract`` command: validate and show configs, run the simulation, lint subclasses.

User errors (a missing file, a bad config or trace line) end with one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from kvcontract.config import KVContractConfig

__all__ = ["main"]

_USAGE_ERROR = 2


class UsageError(Exception):
    """A user error: reported as one line, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["lint"]:
        from kvcontract.lint.cli import main as lint_main

        return lint_main(arguments[1:])
    parser = _parser()
    options = parser.parse_args(arguments)
    try:
        return int(options.handler(options))
    except UsageError as error:
        print(f"kvcontract: error: {error}", file=sys.stderr)
        return _USAGE_ERROR
    except KeyboardInterrupt:
        print("kvcontract: interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvcontract", description="KV-cache offloading with checked contracts."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    config = commands.add_parser("config", help="validate, show or describe configs")
    config_commands = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    validate = config_commands.add_parser("validate", help="check a config file; list every error")
    validate.add_argument("file", type=Path)
    validate.set_defaults(handler=_config_validate)
    schema = config_commands.add_parser("schema", help="print the config's JSON schema")
    schema.set_defaults(handler=_config_schema)
    show = config_commands.add_parser("show", help="print the defaults, or FILE with defaults filled in")
    show.add_argument("file", type=Path, nargs="?")
    show.set_defaults(handler=_config_show)

    simulate = commands.add_parser(
        "simulate", help="drive a manager and a worker through a workload, verifying every load"
    )
    simulate.add_argument("--config", type=Path, help="config file (default: the simulation defaults)")
    simulate.add_argument("--trace", type=Path, help="Mooncake-format JSONL trace (default: built-in workload)")
    simulate.add_argument("--requests", type=int, help="number of requests (default: 3000, or the whole trace)")
    simulate.add_argument("--seed", type=int, default=0, help="seed of the built-in workload")
    simulate.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    simulate.add_argument("--plot", type=Path, metavar="PNG", help="write hit ratio and throughput over the run")
    simulate.set_defaults(handler=_simulate)

    commands.add_parser("lint", help="check subclasses of the contracts (see kvcontract lint --help)")
    return parser


def _load(path: Path | None, *, simulation: bool = False) -> KVContractConfig:
    from kvcontract.config import ConfigError, load_config
    from kvcontract.sim.defaults import SIMULATION_DEFAULTS

    try:
        return load_config(path, base=SIMULATION_DEFAULTS if simulation else None)
    except ConfigError as error:
        raise UsageError(str(error)) from None


def _config_validate(options: argparse.Namespace) -> int:
    from kvcontract.config import ConfigError, load_config

    try:
        load_config(options.file)
    except ConfigError as error:
        print(f"kvcontract: {error.source}: invalid config", file=sys.stderr)
        for problem in error.problems:
            print(f"  {problem}", file=sys.stderr)
        return _USAGE_ERROR
    print(f"{options.file}: ok")
    return 0


def _config_schema(options: argparse.Namespace) -> int:
    from kvcontract.config import config_json_schema

    print(json.dumps(config_json_schema(), indent=2))
    return 0


def _config_show(options: argparse.Namespace) -> int:
    config = _load(options.file)
    text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)  # pyright: ignore[reportUnknownMemberType]  # types-PyYAML leaves one keyword's type unknown
    print(text, end="")
    return 0


def _simulate(options: argparse.Namespace) -> int:
    from kvcontract.config import ConfigError
    from kvcontract.sim.simulator import DataMismatch
    from kvcontract.sim.report import print_report, write_plot
    from kvcontract.sim.run import run_simulation
    from kvcontract.sim.trace import TraceFormatError

    if options.requests is not None and options.requests < 1:
        raise UsageError(f"--requests must be at least 1, got {options.requests}")
    if options.plot is not None and options.plot.suffix.lower() != ".png":
        raise UsageError(f"--plot writes a PNG file: give a name ending in .png, got {options.plot}")
    config = _load(options.config, simulation=options.config is None)
    try:
        report = run_simulation(
            config,
            trace=options.trace,
            num_requests=options.requests,
            seed=options.seed,
            show_progress=not options.json,
        )
    except (OSError, TraceFormatError, ConfigError) as error:
        raise UsageError(str(error)) from None
    except DataMismatch as error:
        print(f"kvcontract: verification failed: {error}", file=sys.stderr)
        return 1
    if options.json:
        print(json.dumps(report.summary()))
    else:
        print_report(report)
    if options.plot is not None:
        write_plot(report, options.plot)
    return 0
