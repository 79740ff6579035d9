"""One line for each mistake, naming what to change: the nearest known name, the variable, the default, the port."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.cli.support import run_cli


def test_an_unknown_field_names_the_nearest_known_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "typo.yaml"
    config.write_text(
        "kv_layout: {preset: tiny, num_layer: 3}\n"
        "manager: {kind: tiering, primary: {capcity: 8}, secondary: [{kind: file, path: x, capacity: 5, umsk: 7}]}\n"
    )
    outcome = run_cli(capsys, "config", "validate", str(config))
    assert outcome.status == 2
    assert "  kv_layout.num_layer: unknown field; did you mean num_layers?" in outcome.err
    assert "  manager.primary.capcity: unknown field; did you mean capacity?" in outcome.err
    assert "  manager.secondary.0.umsk: unknown field; did you mean umask?" in outcome.err


def test_an_unknown_field_without_a_near_one_lists_the_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "typo.yaml"
    config.write_text("transfer: {zzz: 1}\n")
    outcome = run_cli(capsys, "config", "validate", str(config))
    assert "  transfer.zzz: unknown field; known here: device, pinned," in outcome.err


def test_a_field_from_the_environment_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KVCONTRACT_MANAGER__CAPCITY", "5")
    run_cli(capsys, "simulate", "--requests", "3").assert_user_error(
        "manager.capcity (from KVCONTRACT_MANAGER__CAPCITY): unknown field; did you mean capacity?"
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["simulate", "--requets", "5"], "did you mean --requests? (see kvcontract simulate --help)"),
        (["plan", "--trace", "t", "--polices", "lru"], "did you mean --policies? (see kvcontract plan --help)"),
        (
            ["config", "validate", "c.yaml", "--zzz"],
            "unrecognized arguments: --zzz (see kvcontract config validate --help)",
        ),
    ],
)
def test_a_misspelt_option_names_the_nearest_one_and_the_subcommand_s_help(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_cli(capsys, *argv).assert_user_error(expected)


def test_a_default_capacity_that_does_not_fit_says_it_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("kvcontract.config.machine.physical_memory_bytes", lambda: 1 << 30)
    default, given = tmp_path / "default.yaml", tmp_path / "given.yaml"
    default.write_text("kv_layout: {preset: llama-3.1-70b}\n")
    given.write_text("kv_layout: {preset: llama-3.1-70b}\nmanager: {capacity: 4096}\n")
    said = run_cli(capsys, "config", "validate", str(default)).err
    assert "host memory (the default, 4,096 blocks of this layout: set manager.capacity) is more than" in said
    assert "the default" not in run_cli(capsys, "config", "validate", str(given)).err


def test_a_metrics_port_in_use_names_the_option_and_the_port(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        outcome = run_cli(capsys, "simulate", "--requests", "3", "--json", "--metrics-port", str(port))
    outcome.assert_user_error(f"--metrics-port {port}: cannot serve there")
