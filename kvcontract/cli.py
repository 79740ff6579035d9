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
from typing import TYPE_CHECKING, cast

import yaml

from kvcontract.arguments import USAGE_ERROR, OneLineParser, installed_version

if TYPE_CHECKING:
    from argparse import _SubParsersAction  # pyright: ignore[reportPrivateUsage]  # argparse names the type of add_subparsers() only privately

    from kvcontract.config import KVContractConfig
    from kvcontract.metrics import MetricsCollector

__all__ = ["main"]

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
        return USAGE_ERROR


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
    from kvcontract.extras import MissingExtraError
    from kvcontract.sim.trace import TraceFormatError

    if isinstance(error, (UsageError, ConfigError, TraceFormatError)):
        return " ".join(str(error).split())
    if isinstance(error, MissingExtraError):
        return str(error)
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


def _command(commands: _SubParsersAction[OneLineParser], name: str, summary: str, description: str) -> OneLineParser:
    """A subcommand: ``summary`` in its parent's list, ``description`` at the top of its own --help."""
    return commands.add_parser(name, help=summary, description=description)


_CONFIG_FILE = "a config file: YAML (.yaml, .yml), TOML (.toml) or JSON (.json)"


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="kvcontract", description="KV-cache offloading with checked contracts."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    config = _command(commands, "config", "validate, show or describe configs", "Validate, show or describe configs.")
    config_commands = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    validate = _command(
        config_commands,
        "validate",
        "check a config file, and that this machine can run it; list every error",
        "Check a config file, and that this machine can run it (device, host memory, shared-memory "
        "file); list every error with the path of its field. Exit 0 when valid, 2 otherwise.",
    )
    validate.add_argument("file", type=Path, help=_CONFIG_FILE)
    validate.set_defaults(handler=_config_validate)
    schema = _command(config_commands, "schema", "print the config's JSON schema", "Print the config's JSON schema, for editors and CI.")
    schema.set_defaults(handler=_config_schema)
    show = _command(
        config_commands,
        "show",
        "print the config a command runs with: FILE's, or simulate's without one",
        "Print the config a command runs with, as YAML that loads back as the same config: FILE's, "
        "or without FILE the one kvcontract simulate runs with; defaults filled in, KVCONTRACT_ "
        "variables applied, capacities in blocks.",
    )
    show.add_argument(
        "file", type=Path, nargs="?", help=f"{_CONFIG_FILE} (default: the config of kvcontract simulate)"
    )
    show.set_defaults(handler=_config_show)

    simulate = _command(
        commands,
        "simulate",
        "drive a manager and a worker through a workload, verifying every load",
        "Serve a workload (built-in and seeded, or a trace) through a config's manager and worker with "
        "real data movement, as an engine would, compare every loaded block byte for byte with what "
        "was stored, and report hit ratio, bytes moved and time taken.",
    )
    _simulate_arguments(simulate)
    simulate.set_defaults(handler=_simulate)
    plan = _command(
        commands,
        "plan",
        "hit-ratio curves of policies over capacities for a trace, with the optimum as bound",
        "Replay a trace's block lists at a grid of capacities and print each policy's prefix "
        "hit-ratio curve beside the offline optimum's (the bound no policy passes); optionally the "
        "smallest capacity that reaches a target, and the split of LRU's hits over tiers.",
    )
    _plan_arguments(plan)
    plan.set_defaults(handler=_plan)
    check = _command(
        commands,
        "check",
        "lint the project, then run the conformance kit on the components pyproject.toml names",
        "Lint the project with kvcontract-lint, then run the conformance kit on each component "
        "[tool.kvcontract] components names in pyproject.toml; print one line per component, and "
        "the shrunk call sequence of any rule broken. Exit 0 clean, 1 findings, 2 usage error.",
    )
    check.add_argument("paths", nargs="*", type=Path, help="files or folders to lint (default: the project's settings)")
    check.add_argument(
        "--project", type=Path, default=Path("pyproject.toml"), help="pyproject.toml naming the components (default: ./pyproject.toml)"
    )
    check.add_argument("--thorough", action="store_true", help="the kit's thorough profile (for CI)")
    check.set_defaults(handler=_check)
    commands.add_parser("lint", help="check subclasses of the contracts (see kvcontract lint --help)")
    return parser


def _plan_arguments(plan: argparse.ArgumentParser) -> None:
    """The options of ``plan``."""
    plan.add_argument("--trace", type=Path, required=True, help="Mooncake JSONL, or JSONL/CSV of request_id and hash_ids")
    plan.add_argument("--policies", default="lru,arc", help="comma-separated policy names (default: lru,arc)")
    plan.add_argument(
        "--capacities", default="1%..50%", help="A..B or A,B,C: percentages of unique blocks, sizes, or blocks"
    )
    plan.add_argument("--points", type=int, default=20, help="capacities in an A..B range (default 20)")
    plan.add_argument("--block-bytes", type=int, help="bytes of one offload block, to turn sizes into blocks")
    plan.add_argument("--config", type=Path, help="a config whose KV layout gives the block size")
    plan.add_argument("--target-hit", type=float, help="report the smallest capacity reaching this hit ratio")
    plan.add_argument("--sample", type=float, help="SHARDS sampling rate for LRU's curve, e.g. 0.01")
    plan.add_argument(
        "--tiers", help="split LRU's hits by level: host,file / host,redis / host,file,redis (lookup order)"
    )
    plan.add_argument(
        "--tier-capacity", metavar="NAME=SIZE,...", help="each tier's size with --tiers, e.g. file=40%%,redis=64GiB"
    )
    plan.add_argument("--processes", type=int, help="processes for the replays (default: one per core)")
    plan.add_argument("--json", nargs="?", const=_STDOUT, metavar="FILE", help="the plan as JSON, on standard output or in FILE")
    plan.add_argument("--plot", type=Path, metavar="PNG", help="write the curves as a PNG (extra: plot)")


def _simulate_arguments(simulate: argparse.ArgumentParser) -> None:
    """The options of ``simulate``: one place to add more."""
    simulate.add_argument(
        "--config", type=Path, help="config file: YAML, TOML or JSON (default: the simulation's, see --print-config)"
    )
    simulate.add_argument(
        "--print-config", action="store_true", help="print the config the run would use, as YAML, and run nothing"
    )
    simulate.add_argument("--trace", type=Path, help="Mooncake-format JSONL trace (default: built-in workload)")
    simulate.add_argument("--requests", type=int, help="number of requests (default: 3000, or the whole trace)")
    simulate.add_argument("--seed", type=int, default=0, help="seed of the built-in workload (default: 0)")
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
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on 127.0.0.1:PORT while it runs (extra: metrics)",
    )
    simulate.add_argument(
        "--engines",
        type=int,
        default=1,
        help="engines with their own host memory sharing the config's tiers, requests dealt round-robin (default: 1)",
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
        return USAGE_ERROR
    with _writing():
        print(f"{options.file}: ok")
    return 0


def _config_schema(options: argparse.Namespace) -> int:
    from kvcontract.config import config_json_schema

    with _writing():
        print(json.dumps(config_json_schema(), indent=2))
    return 0


def _config_show(options: argparse.Namespace) -> int:
    _print_config(_load(options.file, simulation=options.file is None))
    return 0


def _print_config(config: KVContractConfig) -> None:
    """``config`` as YAML that loads back as the same config."""
    text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)  # pyright: ignore[reportUnknownMemberType]  # types-PyYAML leaves one keyword's type unknown
    with _writing():
        print(text, end="")
        print(f"# block identity: {config.block_identity().fingerprint_hex} (kv_layout and identity together)")


def _simulate(options: argparse.Namespace) -> int:
    from kvcontract.sim.report import (
        print_report,
        require_plotting,
        run_heading,
        write_plot,
        write_summary,
    )
    from kvcontract.sim.run import check_request_count, run_simulation
    from kvcontract.sim.simulator import DataMismatch

    try:
        check_request_count(options.requests)
    except ValueError as error:
        raise UsageError(f"--{error}") from None
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
    if options.print_config:
        _print_config(config)
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
            )
        except DataMismatch as error:
            print(f"kvcontract: verification failed: {error}", file=sys.stderr)
            return 1
    if json_path is not None:
        write_summary(report, json_path)
        _wrote("the figures as JSON", json_path)
    with _writing():
        if options.json == _STDOUT:
            print(json.dumps(report.summary()))
        else:
            print_report(report, run_heading(config, trace=options.trace, requests=report.requests, seed=options.seed))
    if options.plot is not None:
        write_plot(report, options.plot)
        _wrote("the plot of the run", options.plot)
    return 0


def _wrote(what: str, path: Path) -> None:
    """Say on standard error which file a command wrote, so that standard output keeps only its report."""
    print(f"kvcontract: wrote {what} to {path}", file=sys.stderr)


@contextmanager
def _metrics_served(port: int | None) -> Generator[MetricsCollector | None, None, None]:
    """A collector served on ``127.0.0.1:port`` while the block runs, or ``None`` without a port."""
    if port is None:
        yield None
        return
    if not 0 <= port <= 65535:
        raise UsageError(f"--metrics-port must be a TCP port (0-65535), got {port}")
    from kvcontract.metrics import MetricsCollector
    from kvcontract.prometheus import serve_metrics

    collector = MetricsCollector()
    server = serve_metrics(collector, port)
    print(f"kvcontract: metrics at http://127.0.0.1:{server.port}/metrics", file=sys.stderr)
    try:
        yield collector
    finally:
        server.stop()


def _plan(options: argparse.Namespace) -> int:
    from kvcontract.plan.grid import GridError, parse_capacity_grid
    from kvcontract.plan.planner import plan_capacity, plan_steps
    from kvcontract.plan.report import (
        plan_json,
        print_plan,
        print_tier_plan,
        tier_plan_json,
        write_plan_plot,
    )
    from kvcontract.plan.tier_plan import plan_tiers
    from kvcontract.policies import available_policies
    from kvcontract.sim.output import progress, write_text
    from kvcontract.sim.report import require_plotting
    from kvcontract.sim.trace import read_block_lists

    policies = [name.strip() for name in options.policies.split(",") if name.strip()]
    unknown = sorted(set(policies) - set(available_policies()))
    if not policies or unknown:
        raise UsageError(f"--policies: unknown {', '.join(unknown) or 'empty list'}; known: {', '.join(available_policies())}")
    if options.sample is not None and not 0 < options.sample <= 1:
        raise UsageError(f"--sample is a rate in (0, 1], e.g. 0.01 for 1 %; got {options.sample}")
    if options.processes is not None and not 1 <= options.processes <= 256:
        raise UsageError(f"--processes must be between 1 and 256, got {options.processes}")
    if options.target_hit is not None and not 0 < options.target_hit <= 1:
        raise UsageError(f"--target-hit is a hit ratio in (0, 1], got {options.target_hit}")
    json_path = None if options.json in (None, _STDOUT) else Path(options.json)
    if json_path is not None:
        _check_writable(json_path, "--json")
    if options.plot is not None:
        try:
            require_plotting()
        except ImportError as error:
            raise UsageError(f"--plot: {error}") from None
        _check_writable(options.plot, "--plot")
    block_bytes = options.block_bytes
    if block_bytes is not None and block_bytes < 1:
        raise UsageError(f"--block-bytes must be at least 1, got {block_bytes}")
    if options.config is not None:
        block_bytes = _load(options.config).kv_layout.offload_block_bytes
    requests = read_block_lists(options.trace)
    unique = len({hash_id for request in requests for hash_id in request})
    if not unique:
        raise UsageError(f"{options.trace}: the trace has no blocks; give requests with hash ids")
    try:
        grid = parse_capacity_grid(options.capacities, unique_blocks=unique, block_bytes=block_bytes, points=options.points)
    except GridError as error:
        raise UsageError(f"--capacities: {error}") from None
    tier_sizes = _tier_sizes(options, unique, block_bytes)
    with progress(f"planning {len(grid)} capacities", plan_steps(grid, policies)) as advance:
        plan = plan_capacity(
            requests, grid, policies, sample_rate=options.sample, processes=options.processes, on_step=advance
        )
    tiers = plan_tiers(requests, grid, tier_sizes) if tier_sizes else None
    target = options.target_hit
    if target is not None and target > plan.unbounded_hit_ratio:
        raise UsageError(
            f"--target-hit {target} is above {plan.unbounded_hit_ratio:.4f}, the hit ratio of this trace with room "
            "for every block: no capacity reaches it"
        )
    document = plan_json(plan, block_bytes=block_bytes, target=target)
    if tiers is not None:
        document["tiers"] = tier_plan_json(tiers, block_bytes=block_bytes)
    if json_path is not None:
        write_text(json_path, json.dumps(document, indent=2) + "\n")
        _wrote("the plan as JSON", json_path)
    with _writing():
        if options.json == _STDOUT:
            print(json.dumps(document))
        else:
            print_plan(plan, block_bytes=block_bytes, target=target)
            if tiers is not None:
                print_tier_plan(tiers, block_bytes=block_bytes)
    if options.plot is not None:
        write_plan_plot(plan, options.plot, target=target)
        _wrote("the plot of the curves", options.plot)
    return 0


def _tier_sizes(options: argparse.Namespace, unique: int, block_bytes: int | None) -> dict[str, int]:
    """``--tiers`` and ``--tier-capacity`` as each tier below host and its size in blocks, in lookup order."""
    from kvcontract.plan.grid import GridError, parse_capacity_grid
    from kvcontract.plan.tier_plan import HOST, TIER_KINDS

    if options.tiers is None:
        if options.tier_capacity is not None:
            raise UsageError("--tier-capacity sizes the tiers of --tiers: give --tiers host,file (or redis) too")
        return {}
    levels = [name.strip() for name in options.tiers.split(",")]
    below = levels[1:]
    if levels[0] != HOST or not below or len(set(levels)) != len(levels) or not set(below) <= set(TIER_KINDS):
        raise UsageError(f"--tiers {options.tiers!r}: write host first, then file and/or redis once each, e.g. host,file,redis")
    sizes: dict[str, str] = {}
    for part in options.tier_capacity.split(",") if options.tier_capacity else ():
        name, equals, size = part.partition("=")
        if not equals or name.strip() not in below or name.strip() in sizes:
            raise UsageError(f"--tier-capacity: {part.strip()!r} is not NAME=SIZE for one of {', '.join(below)}; e.g. {below[0]}=40%")
        sizes[name.strip()] = size
    missing = [name for name in below if name not in sizes]
    if missing:
        raise UsageError(f"--tier-capacity: give the size of {', '.join(missing)}, e.g. {missing[0]}=40% or {missing[0]}=64GiB")
    blocks: dict[str, int] = {}
    for name in below:
        if ".." in sizes[name]:
            raise UsageError(f"--tier-capacity: {name}={sizes[name]} is a range; give one size per tier")
        try:
            blocks[name] = parse_capacity_grid(sizes[name], unique_blocks=unique, block_bytes=block_bytes)[0]
        except GridError as error:
            raise UsageError(f"--tier-capacity {name}: {error}") from None
    return blocks


def _check(options: argparse.Namespace) -> int:
    from kvcontract.lint.cli import main as lint_main
    from kvcontract.testing.components import (
        ComponentError,
        check_component,
        read_components,
    )

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib

    # The project is read before the lint runs, so a bad --project stops with one line and no findings.
    wanted = '[tool.kvcontract] components = ["package.module:Name", ...]'
    try:
        found: object = tomllib.loads(options.project.read_text(encoding="utf-8")).get("tool", {}).get("kvcontract", {})
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{options.project}: not valid TOML: {error}") from None
    except FileNotFoundError:
        raise UsageError(
            f"{options.project}: no such file; kvcontract check reads {wanted} from it (give another with --project)"
        ) from None
    table = cast("dict[str, object]", found) if isinstance(found, dict) else {}  # a TOML table has string keys
    if not table.get("components"):
        raise UsageError(
            f"{options.project}: no components to check: kvcontract check looked for {wanted}; "
            "add it, or run kvcontract lint to lint alone"
        )
    try:
        components = read_components(table)
    except ComponentError as error:
        raise UsageError(str(error)) from None
    status = lint_main([str(path) for path in options.paths])
    if status == USAGE_ERROR:
        return status
    for spec in components:
        outcome = check_component(spec, "thorough" if options.thorough else "fast")
        with _writing():
            print(outcome.line)
            print(outcome.reproducer, end="")
        if outcome.error is not None:
            status = 1
    return status


def _simulate_engines(options: argparse.Namespace, config: KVContractConfig) -> int:
    """``simulate --engines N``: the engines share the config's tiers (a Redis tier makes cross-engine hits)."""
    from kvcontract.sim.multi_engine import (
        MAX_ENGINES,
        print_engines_report,
        run_engines_simulation,
    )
    from kvcontract.sim.output import write_text
    from kvcontract.sim.report import run_heading
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
    if options.json not in (None, _STDOUT):
        write_text(Path(options.json), json.dumps(report.summary()) + "\n")
        _wrote("the figures as JSON", Path(options.json))
    with _writing():
        if options.json == _STDOUT:
            print(json.dumps(report.summary()))
        else:
            heading = run_heading(
                config, trace=options.trace, requests=report.requests, seed=options.seed, engines=options.engines
            )
            print_engines_report(report, heading)
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
