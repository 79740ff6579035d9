"""The kvcontract command: exit codes, one-line errors, JSON shape, a short run.

A few tests run it as a subprocess, as a user does (the entry point, a real process's exit
status and streams); the many inputs run through :func:`kvcontract.cli.main` in-process,
the same code without starting an interpreter and importing torch for each (about 1.5 s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.support import Outcome, run_cli


def kvcontract(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the command line as a user would (through the installed entry point's module)."""
    return subprocess.run(
        [sys.executable, "-m", "kvcontract", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


def assert_user_error(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert expected in result.stderr, result.stderr


def test_config_validate_ok(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("manager: {kind: cpu, capacity: 8GiB, policy: lru}\n")
    result = kvcontract("config", "validate", str(path))
    assert result.returncode == 0
    assert result.stdout.strip() == f"{path}: ok"


def assert_refused(outcome: Outcome, expected: str) -> None:
    """Exit 2 saying ``expected`` on standard error, without a traceback."""
    assert outcome.status == 2, outcome.err
    assert "Traceback" not in outcome.err
    assert expected in outcome.err, outcome.err


def test_config_validate_lists_every_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kv_layout: {num_layers: 0, dtype: float64}\nmanager: {kind: cpu, colour: red}\n")
    outcome = run_cli(capsys, "config", "validate", str(path))
    assert_refused(outcome, f"kvcontract: {path}: invalid config")
    assert "  kv_layout.num_layers: Input should be greater than or equal to 1" in outcome.err
    assert "  kv_layout.dtype: Input should be" in outcome.err
    assert "  manager.colour: unknown field; known here: admission, capacity," in outcome.err


@pytest.mark.parametrize(
    ("config", "field", "says"),
    [
        ('manager: {kind: tiering, secondary: [{kind: file, path: "", capacity: 10}]}', "manager.secondary.0.path", "empty"),
        ("manager: {kind: cpu, capacity: 100}\nobserve: {whatif: {capacities: [1.0e-9]}}", "observe.whatif.capacities.0", "less than one block"),
        ('manager: {kind: cpu, capacity: 100}\nobserve: {whatif: {capacities: ["2", 3]}}', "observe.whatif.capacities.0", "valid number"),
        ("manager: {kind: cpu, capacity: 100}\nobserve: {whatif: {capacities: [true]}}", "observe.whatif.capacities.0", "valid number"),
        ("manager: {kind: cpu, capacity: -5}", "manager.capacity", "capacity -5 is below one block"),
    ],
)  # fmt: skip
def test_configs_that_cannot_work_are_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, field: str, says: str
) -> None:
    """Regression: an empty file tier path, a what-if shadow under one block and non-numbers as multiples passed."""
    path = tmp_path / "bad.yaml"
    path.write_text(config + "\n")
    outcome = run_cli(capsys, "config", "validate", str(path))
    assert_refused(outcome, f"kvcontract: {path}: invalid config")
    problems = outcome.err.splitlines()[1:]
    assert len(problems) == 1 and problems[0].startswith(f"  {field}: ") and says in problems[0], outcome.err


def test_config_schema_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = run_cli(capsys, "config", "schema")
    assert outcome.status == 0
    schema = json.loads(outcome.out)
    assert "kv_layout" in schema["properties"]


def test_config_show_prints_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = run_cli(capsys, "config", "show")
    assert outcome.status == 0
    assert "kv_layout:" in outcome.out and "runtime_checks: true" in outcome.out


def test_config_show_prints_the_block_identity_s_fingerprint(tmp_path: Path) -> None:
    from kvcontract.config import load_config

    path = tmp_path / "model.yaml"
    path.write_text("identity: {model: org/model-a, tp_size: 2, tp_rank: 1}\n")
    result = kvcontract("config", "show", str(path))
    assert result.returncode == 0, result.stderr
    assert f"block identity: {load_config(path).block_identity().fingerprint_hex}" in result.stdout
    other = tmp_path / "other.yaml"
    other.write_text("identity: {model: org/model-b, tp_size: 2, tp_rank: 1}\n")
    assert load_config(other).block_identity().fingerprint != load_config(path).block_identity().fingerprint


MALFORMED = [
    ("a.yaml", "kv_layout: {block_tokens: 16, offload_block_tokens: 24}", "must be a multiple of block_tokens"),
    ("b.yaml", "manager: {kind: cpu, capacity: 0}", "manager.capacity: capacity 0 is below one block"),
    ("c.yaml", "manager: {kind: cpu, capacity: 1KiB}", "holds no offload block"),
    ("d.yaml", "manager: {kind: warp}", "manager: Input tag 'warp'"),
    ("e.yaml", "manager: {kind: cpu, policy: {kind: mru}}", "unknown policy 'mru'"),
    ("f.yaml", "manager: {kind: cpu, admission: {kind: reuse, store_threshold: 1}}", "store_threshold"),
    ("g.yaml", "manager: {kind: cpu, admission: {kind: bloom}}", "admission.kind"),
    ("h.yaml", "kv_layout: {dtype: float64}", "kv_layout.dtype"),
    ("i.yaml", "kv_layout: {num_kv_heads: -1}", "kv_layout.num_kv_heads"),
    ("j.yaml", "kv_layout: gpt-9", "unknown layout preset 'gpt-9'"),
    ("k.yaml", "transfer: {device: tpu}", "transfer.device"),
    ("l.yaml", "transfer: {pinned: maybe}", "transfer.pinned"),
    ("m.yaml", "runtime_checks: perhaps", "runtime_checks"),
    ("n.yaml", "colour: blue", "colour: unknown field; known here:"),
    ("o.yaml", "manager: [1, 2]", "manager"),
    ("p.yaml", "- just\n- a list", "a config is a mapping of sections"),
    ("q.yaml", "manager: {kind: cpu", "not valid YAML"),
    ("r.json", '{"manager": }', "not valid JSON"),
    ("s.toml", "[manager\nkind = 1", "not valid TOML"),
    ("t.cfg", "x=1", "unknown config format '.cfg'"),
    ("u.yaml", "manager: {kind: tiering, secondary: [{kind: file, capacity: 10}]}", "secondary.0.path: Field required"),
]


@pytest.mark.parametrize(("name", "text", "expected"), MALFORMED)
def test_malformed_configs_exit_2_with_a_precise_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert_refused(run_cli(capsys, "config", "validate", str(path)), expected)
    run_cli(capsys, "simulate", "--config", str(path), "--requests", "5", "--json").assert_user_error(expected)


def test_a_malformed_config_ends_the_process_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("manager: {kind: cpu, capacity: 0}")
    simulate = kvcontract("simulate", "--config", str(path), "--requests", "5", "--json")
    assert_user_error(simulate, "manager.capacity: capacity 0 is below one block")
    assert len(simulate.stderr.strip().splitlines()) == 1 and simulate.stdout == ""


def test_missing_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_refused(run_cli(capsys, "config", "validate", str(tmp_path / "none.yaml")), "No such file or directory")
    assert_refused(run_cli(capsys, "simulate", "--trace", str(tmp_path / "none.jsonl")), "none.jsonl")


def test_bad_trace_line_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1, 2]}\nnot json\n')
    run_cli(capsys, "simulate", "--trace", str(trace), "--json").assert_user_error("t.jsonl:2")


def test_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_cli(capsys, "simulate", "--requests", "0").assert_user_error("--requests must be at least 1")
    run_cli(capsys, "simulate", "--plot", str(tmp_path / "p.svg")).assert_user_error("--plot writes a PNG file")
    assert kvcontract("frobnicate").returncode == 2


def test_short_simulation_json_and_plot(tmp_path: Path) -> None:
    plot = tmp_path / "run.png"
    result = kvcontract("simulate", "--requests", "200", "--json", "--plot", str(plot))
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["requests"] == 200
    assert figures["device"] == "cpu"
    assert 0.0 < figures["hit_ratio"] < 1.0
    assert figures["verified_blocks"] == figures["hit_blocks"] > 0
    assert figures["bytes_loaded"] > 0 and figures["bytes_stored"] > 0
    assert figures["failed_stores"] == figures["failed_loads"] == 0
    assert figures["identity_mismatches"] == 0 and len(figures["identity"]) == 32
    assert set(figures) >= {"tokens_from_offload", "transfer_gbps", "manager_us_per_block", "blocks"}
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_simulation_table(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = run_cli(capsys, "simulate", "--requests", "50")
    assert outcome.status == 0, outcome.err
    for row in ("hit ratio", "tokens served from offload", "transfer GiB/s", "manager µs per block"):
        assert row in outcome.out


@pytest.mark.parametrize("command", ["simulate", "plan"])
def test_the_shipped_trace_runs_by_name_from_any_folder(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    options = ["--requests", "20"] if command == "simulate" else ["--capacities", "1%,5%", "--processes", "1"]
    outcome = run_cli(capsys, command, "--trace", "mooncake-conversation", *options, "--json")
    assert outcome.status == 0, outcome.err
    document = json.loads(outcome.out)
    assert document["requests"] == 20 if command == "simulate" else document["unbounded_hit_ratio"] > 0.36


@pytest.mark.parametrize("command", [["simulate", "--requests", "3"], ["plan", "--trace", "mooncake-conversation"]])
def test_one_file_named_by_two_outputs_is_refused_before_the_run(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    outcome = run_cli(capsys, *command, "--json", "same.png", "--plot", "./same.png")
    outcome.assert_user_error("--json and --plot both name same.png: give each output its own file")
    assert not (tmp_path / "same.png").exists()


def test_a_key_file_others_can_read_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "key"
    key.write_bytes(bytes(range(32)))
    key.chmod(0o644)
    path = tmp_path / "sealed.yaml"
    path.write_text(
        "manager: {kind: tiering, primary: {kind: cpu, capacity: 64}, secondary: "
        f"[{{kind: file, path: {tmp_path / 'tier'}, capacity: 64, integrity_key_file: {key}}}]}}\n"
    )
    outcome = run_cli(capsys, "simulate", "--config", str(path), "--requests", "2")
    assert_refused(outcome, f"chmod 600 {key}")
    assert len(outcome.err.strip().splitlines()) == 1, outcome.err
