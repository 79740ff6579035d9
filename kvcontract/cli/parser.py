"""The parser of every ``kvcontract`` subcommand, each bound to its handler."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from kvcontract.arguments import OneLineParser, installed_version
from kvcontract.cli.check import run_check
from kvcontract.cli.config_command import (
    run_config_schema,
    run_config_show,
    run_config_validate,
)
from kvcontract.cli.plan import run_plan
from kvcontract.cli.simulate import run_simulate
from kvcontract.cli.streams import STDOUT

if TYPE_CHECKING:
    from argparse import _SubParsersAction  # pyright: ignore[reportPrivateUsage]  # argparse names the type of add_subparsers() only privately


__all__ = ["build_parser"]


def _command(commands: _SubParsersAction[OneLineParser], name: str, summary: str, description: str) -> OneLineParser:
    """A subcommand: ``summary`` in its parent's list, ``description`` at the top of its own --help;
    it is the ``command_parser`` of the options it parses, so that it reports what it does not know."""
    command = commands.add_parser(name, help=summary, description=description)
    command.set_defaults(command_parser=command)
    return command


_CONFIG_FILE = "a config file: YAML (.yaml, .yml), TOML (.toml) or JSON (.json)"


def build_parser() -> OneLineParser:
    """The ``kvcontract`` parser: every subcommand with its options, each bound to its handler."""
    parser = OneLineParser(prog="kvcontract", description="KV-cache offloading with checked contracts.")
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
    validate.set_defaults(handler=run_config_validate)
    schema = _command(
        config_commands,
        "schema",
        "print the config's JSON schema",
        "Print the config's JSON schema, for editors and CI.",
    )
    schema.set_defaults(handler=run_config_schema)
    show = _command(
        config_commands,
        "show",
        "print the config a command runs with: FILE's, or simulate's without one",
        "Print the config a command runs with, as YAML that loads back as the same config: FILE's, "
        "or without FILE the one kvcontract simulate runs with; defaults filled in, KVCONTRACT_ "
        "variables applied, capacities in blocks.",
    )
    show.add_argument("file", type=Path, nargs="?", help=f"{_CONFIG_FILE} (default: the config of kvcontract simulate)")
    show.set_defaults(handler=run_config_show)

    simulate = _command(
        commands,
        "simulate",
        "drive a manager and a worker through a workload, verifying every load",
        "Serve a workload (built-in and seeded, or a trace) through a config's manager and worker with "
        "real data movement, as an engine would, compare every loaded block byte for byte with what "
        "was stored, and report hit ratio, bytes moved and time taken.",
    )
    _simulate_arguments(simulate)
    simulate.set_defaults(handler=run_simulate)
    plan = _command(
        commands,
        "plan",
        "hit-ratio curves of policies over capacities for a trace, with the optimum as bound",
        "Replay a trace's block lists at a grid of capacities and print each policy's prefix "
        "hit-ratio curve beside the offline optimum's (the bound no policy passes); optionally the "
        "smallest capacity that reaches a target, and the split of LRU's hits over tiers.",
    )
    _plan_arguments(plan)
    plan.set_defaults(handler=run_plan)
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
        "--project",
        type=Path,
        default=Path("pyproject.toml"),
        help="pyproject.toml naming the components (default: ./pyproject.toml)",
    )
    check.add_argument("--thorough", action="store_true", help="the kit's thorough profile (for CI)")
    check.set_defaults(handler=run_check)
    commands.add_parser("lint", help="check subclasses of the contracts (see kvcontract lint --help)")
    return parser


def _plan_arguments(plan: argparse.ArgumentParser) -> None:
    """The options of ``plan``."""
    plan.add_argument(
        "--trace",
        type=Path,
        required=True,
        help="Mooncake JSONL, or JSONL/CSV of request_id and hash_ids, gzip or not; mooncake-conversation: the shipped trace",
    )
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
        "--tiers",
        help="split LRU's hits by level: host,file / host,redis / host,mooncake / host,file,redis (lookup order)",
    )
    plan.add_argument(
        "--tier-capacity", metavar="NAME=SIZE,...", help="each tier's size with --tiers, e.g. file=40%%,redis=64GiB"
    )
    plan.add_argument("--processes", type=int, help="processes for the replays (default: one per core)")
    plan.add_argument(
        "--json", nargs="?", const=STDOUT, metavar="FILE", help="the plan as JSON, on standard output or in FILE"
    )
    plan.add_argument("--plot", type=Path, metavar="PNG", help="write the curves as a PNG (extra: plot)")


def _simulate_arguments(simulate: argparse.ArgumentParser) -> None:
    """The options of ``simulate``: one place to add more."""
    simulate.add_argument(
        "--config", type=Path, help="config file: YAML, TOML or JSON (default: the simulation's, see --print-config)"
    )
    simulate.add_argument(
        "--print-config", action="store_true", help="print the config the run would use, as YAML, and run nothing"
    )
    simulate.add_argument(
        "--trace",
        type=Path,
        help="Mooncake-format JSONL trace, gzip or not; mooncake-conversation: the shipped trace "
        "(default: built-in workload)",
    )
    simulate.add_argument("--requests", type=int, help="number of requests (default: 3000, or the whole trace)")
    simulate.add_argument("--seed", type=int, default=0, help="seed of the built-in workload (default: 0)")
    simulate.add_argument(
        "--json",
        nargs="?",
        const=STDOUT,
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
