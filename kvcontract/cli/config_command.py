"""``kvcontract config validate|schema|show``: configs checked and shown as a command runs them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from kvcontract.arguments import USAGE_ERROR
from kvcontract.cli.streams import writing

if TYPE_CHECKING:
    from kvcontract.config import KVContractConfig

__all__ = ["load_command_config", "print_config", "run_config_schema", "run_config_show", "run_config_validate"]


def load_command_config(path: Path | None, *, simulation: bool = False) -> KVContractConfig:
    """The config a command runs with: ``path``'s, or with none the simulation's built-in one (``simulation``) or the library's defaults."""
    from kvcontract.config import load_config
    from kvcontract.sim.defaults import SIMULATION_DEFAULTS

    return load_config(path, base=SIMULATION_DEFAULTS if simulation else None)


def run_config_validate(options: argparse.Namespace) -> int:
    """``kvcontract config validate``: every error of the file with its field path, and with ``--machine`` whether this machine can run it."""
    from kvcontract.config import ConfigError, check_machine, load_config

    try:
        check_machine(load_config(options.file), str(options.file))
    except ConfigError as error:
        print(f"kvcontract: {error.source}: invalid config", file=sys.stderr)
        for problem in error.problems:
            print(f"  {problem}", file=sys.stderr)
        return USAGE_ERROR
    with writing():
        print(f"{options.file}: ok")
    return 0


def run_config_schema(options: argparse.Namespace) -> int:
    """``kvcontract config schema``: the JSON schema of the config."""
    from kvcontract.config import config_json_schema

    with writing():
        print(json.dumps(config_json_schema(), indent=2))
    return 0


def run_config_show(options: argparse.Namespace) -> int:
    """``kvcontract config show``: the config a command given the file runs with, defaults filled in."""
    print_config(load_command_config(options.file, simulation=options.file is None))
    return 0


def print_config(config: KVContractConfig) -> None:
    """``config`` as YAML that loads back as the same config."""
    text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)  # pyright: ignore[reportUnknownMemberType]  # types-PyYAML leaves one keyword's type unknown
    with writing():
        print(text, end="")
        print(f"# block identity: {config.block_identity().fingerprint_hex} (kv_layout and identity together)")
