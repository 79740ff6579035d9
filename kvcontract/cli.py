"""The ``kvcontract`` command: validate and show configs, run the simulation, lint subclasses.

User errors never show a traceback: the boundaries (config loading, trace reading, the
checks of arguments and output paths before a run) raise the errors named in
``_one_line``, and :func:`main` alone turns them into one line on stderr and exit status 2.
A closed standard output (``kvcontract config schema | head -1``) ends quietly with the
status a shell gives a process killed by ``SIGPIPE``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import yaml
from typing_extensions import override

if TYPE_CHECKING:
    from kvcontract.config import KVContractConfig

__all__ = ["main"]

_USAGE_ERROR = 2
_CLOSED_PIPE = 141
"""128 + SIGPIPE: what a shell reports for a process that a closed pipe ended."""
_STDOUT = "-"


class UsageError(Exception):
    """A user error: reported as one line, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["lint"]:
        from kvcontract.lint.cli import main as lint_main

        return lint_main(arguments[1:])
    options = _parser().parse_args(arguments)
    try:
        _check_environment()
        status = int(options.handler(options))
        with _writing():
            sys.stdout.flush()
        return status
    except BrokenPipeError:
        _discard_stdout()
        return _CLOSED_PIPE
    except KeyboardInterrupt:
        print("kvcontract: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        message = _one_line(error)
        if message is None:
            raise
        print(f"kvcontract: error: {message}", file=sys.stderr)
        return _USAGE_ERROR


def _check_environment() -> None:
    """``KVCONTRACT_CHECKS`` is read when the first contract call is checked: read it up front,
    so that a bad value is one line here, not an error in the middle of a run."""
    from kvcontract.enforce import checks_mode

    try:
        checks_mode()
    except ValueError as error:
        raise UsageError(str(error)) from None


def _one_line(error: Exception) -> str | None:
    """The line that reports a known user error, or ``None`` for anything else (a bug)."""
    from kvcontract.config import ConfigError
    from kvcontract.sim.trace import TraceFormatError

    if isinstance(error, (UsageError, ConfigError, TraceFormatError)):
        return " ".join(str(error).split())
    if isinstance(error, ImportError) and "pip install 'kvcontract[" in str(error):
        return str(error)  # an optional dependency missing: the message names the extra
    if isinstance(error, OSError):
        reason = error.strerror or str(error)
        return f"{error.filename}: {reason}" if error.filename is not None else reason
    return None


@contextmanager
def _writing() -> Generator[None, None, None]:
    """Around writes to standard output: one that fails on a full disk or a broken device is a
    user error, and standard output then points at the null device, so that the interpreter's
    own last flush cannot fail again (a closed pipe passes through as ``BrokenPipeError``)."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as error:
        _discard_stdout()
        raise UsageError(f"cannot write to standard output: {error.strerror or error}") from None


def _discard_stdout() -> None:
    """Point standard output at the null device: what is still buffered there is dropped."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a caller (tests, an embedding program)
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, descriptor)
    os.close(null)


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line, as every other error of the command."""

    @override
    def error(self, message: str) -> NoReturn:
        self.exit(_USAGE_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kvcontract", description="KV-cache offloading with checked contracts."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    config = commands.add_parser("config", help="validate, show or describe configs")
    config_commands = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    validate = config_commands.add_parser(
        "validate", help="check a config file, and that this machine can run it; list every error"
    )
    validate.add_argument("file", type=Path)
    validate.set_defaults(handler=_config_validate)
    schema = config_commands.add_parser("schema", help="print the config's JSON schema")
    schema.set_defaults(handler=_config_schema)
    show = config_commands.add_parser(
        "show", help="print the defaults, or FILE with defaults filled in and capacities in blocks"
    )
    show.add_argument("file", type=Path, nargs="?")
    show.set_defaults(handler=_config_show)

    simulate = commands.add_parser(
        "simulate", help="drive a manager and a worker through a workload, verifying every load"
    )
    _simulate_arguments(simulate)
    simulate.set_defaults(handler=_simulate)
    commands.add_parser("lint", help="check subclasses of the contracts (see kvcontract lint --help)")
    return parser


def _simulate_arguments(simulate: argparse.ArgumentParser) -> None:
    """The options of ``simulate``: one place to add more."""
    simulate.add_argument("--config", type=Path, help="config file (default: the simulation defaults)")
    simulate.add_argument("--trace", type=Path, help="Mooncake-format JSONL trace (default: built-in workload)")
    simulate.add_argument("--requests", type=int, help="number of requests (default: 3000, or the whole trace)")
    simulate.add_argument("--seed", type=int, default=0, help="seed of the built-in workload")
    simulate.add_argument(
        "--json",
        nargs="?",
        const=_STDOUT,
        metavar="FILE",
        help="the figures as one JSON object, on standard output or in FILE",
    )
    simulate.add_argument(
        "--plot", type=Path, metavar="PNG", help="write hit ratio and throughput over the run (extra: plot)"
    )
    simulate.add_argument(
        "--engines",
        type=int,
        default=1,
        help="engines with their own host memory sharing the config's tiers, requests dealt round-robin",
    )


def _load(path: Path | None, *, simulation: bool = False) -> KVContractConfig:
    from kvcontract.config import load_config
    from kvcontract.sim.defaults import SIMULATION_DEFAULTS

    return load_config(path, base=SIMULATION_DEFAULTS if simulation else None)


def _config_validate(options: argparse.Namespace) -> int:
    from kvcontract.config import ConfigError, check_machine, load_config

    try:
        check_machine(load_config(options.file), str(options.file))
    except ConfigError as error:
        print(f"kvcontract: {error.source}: invalid config", file=sys.stderr)
        for problem in error.problems:
            print(f"  {problem}", file=sys.stderr)
        return _USAGE_ERROR
    with _writing():
        print(f"{options.file}: ok")
    return 0


def _config_schema(options: argparse.Namespace) -> int:
    from kvcontract.config import config_json_schema

    with _writing():
        print(json.dumps(config_json_schema(), indent=2))
    return 0


def _config_show(options: argparse.Namespace) -> int:
    config = _load(options.file)
    text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)  # pyright: ignore[reportUnknownMemberType]  # types-PyYAML leaves one keyword's type unknown
    with _writing():
        print(text, end="")
    return 0


def _simulate(options: argparse.Namespace) -> int:
    from kvcontract.sim.report import print_report, require_plotting, write_plot, write_summary
    from kvcontract.sim.run import MAX_REQUESTS, run_simulation
    from kvcontract.sim.simulator import DataMismatch

    if options.requests is not None and not 1 <= options.requests <= MAX_REQUESTS:
        raise UsageError(f"--requests must be at least 1 and at most {MAX_REQUESTS}, got {options.requests}")
    json_path = None if options.json in (None, _STDOUT) else Path(options.json)
    if json_path is not None:
        _check_writable(json_path, "--json")
    if options.plot is not None:
        if options.plot.suffix.lower() != ".png":
            raise UsageError(f"--plot writes a PNG file: give a name ending in .png, got {options.plot}")
        try:
            require_plotting()
        except ImportError as error:
            raise UsageError(f"--plot: {error}") from None
        _check_writable(options.plot, "--plot")
    config = _load(options.config, simulation=options.config is None)
    if options.engines != 1:
        return _simulate_engines(options, config)
    try:
        report = run_simulation(
            config,
            trace=options.trace,
            num_requests=options.requests,
            seed=options.seed,
            show_progress=options.json is None,
        )
    except DataMismatch as error:
        print(f"kvcontract: verification failed: {error}", file=sys.stderr)
        return 1
    if json_path is not None:
        write_summary(report, json_path)
    with _writing():
        if options.json == _STDOUT:
            print(json.dumps(report.summary()))
        elif json_path is None:
            print_report(report)
    if options.plot is not None:
        write_plot(report, options.plot)
    return 0


def _simulate_engines(options: argparse.Namespace, config: KVContractConfig) -> int:
    """``simulate --engines N``: the engines share the config's tiers (a Redis tier makes cross-engine hits)."""
    from kvcontract.sim.multi_engine import MAX_ENGINES, print_engines_report, run_engines_simulation
    from kvcontract.sim.simulator import DataMismatch

    if not 1 <= options.engines <= MAX_ENGINES:
        raise UsageError(f"--engines must be at least 1 and at most {MAX_ENGINES}, got {options.engines}")
    if options.plot is not None:
        raise UsageError("--plot draws one engine's run: leave it out with --engines")
    try:
        report = run_engines_simulation(
            config, options.engines, trace=options.trace, num_requests=options.requests, seed=options.seed
        )
    except DataMismatch as error:
        print(f"kvcontract: verification failed: {error}", file=sys.stderr)
        return 1
    with _writing():
        if options.json is None:
            print_engines_report(report)
        else:
            text = json.dumps(report.summary())
            if options.json == _STDOUT:
                print(text)
            else:
                Path(options.json).write_text(text + "\n")
    return 0


def _check_writable(path: Path, option: str) -> None:
    """Refuse an output path before the run rather than after it: its folder must take a new file."""
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a directory; give a file name")
    folder = path.parent
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise UsageError(f"{option} {path}: cannot write in {folder}: {error.strerror or error}") from None
