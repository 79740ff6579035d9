"""``config show`` and ``simulate --print-config`` print the config a command runs with, and it validates."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import kvcontract.config.machine as config_module
from kvcontract.config import KVContractConfig, load_config
from kvcontract.sim.defaults import SIMULATION_DEFAULTS
from tests.cli.support import run_cli


def _shown(text: str) -> KVContractConfig:
    return KVContractConfig.model_validate(yaml.safe_load(text))


def test_config_show_prints_what_simulate_runs_with(capsys: pytest.CaptureFixture[str]) -> None:
    shown = run_cli(capsys, "config", "show")
    assert shown.status == 0, shown.err
    assert _shown(shown.out) == load_config(environ={}, base=SIMULATION_DEFAULTS)


def test_what_config_show_prints_validates_on_a_24_gib_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_module, "physical_memory_bytes", lambda: 24 << 30)
    saved = tmp_path / "my.yaml"
    saved.write_text(run_cli(capsys, "config", "show").out)
    validated = run_cli(capsys, "config", "validate", str(saved))
    assert (validated.status, validated.out) == (0, f"{saved}: ok\n"), validated.err


def test_config_show_of_a_file_fills_its_defaults(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("kv_layout: tiny\nmanager: {capacity: 64MiB, policy: arc}\n")
    shown = _shown(run_cli(capsys, "config", "show", str(path)).out)
    assert shown == load_config(path, environ={})
    assert shown.host_blocks == 64 * 2**20 // shown.kv_layout.offload_block_bytes


def test_simulate_print_config_prints_the_run_s_config_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    defaults = run_cli(capsys, "simulate", "--print-config")
    assert defaults.status == 0 and defaults.err == ""
    assert _shown(defaults.out) == load_config(environ={}, base=SIMULATION_DEFAULTS)
    path = tmp_path / "c.yaml"
    path.write_text("kv_layout: tiny\nmanager: {capacity: 100, policy: sieve}\n")
    given = run_cli(capsys, "simulate", "--config", str(path), "--print-config")
    assert _shown(given.out) == load_config(path, environ={})
    assert "simulating" not in given.out and "hit ratio" not in given.out


def test_environment_overrides_are_in_what_is_shown(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVCONTRACT_MANAGER__CAPACITY", "77")
    assert _shown(run_cli(capsys, "config", "show").out).host_blocks == 77
    assert _shown(run_cli(capsys, "simulate", "--print-config").out).host_blocks == 77
