"""Every input path of the command ends in one line and exit 2 (or quietly on a closed pipe)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kvcontract.sim.run as sim_run
from tests.cli.support import run_cli


def kvcontract(
    *args: str, env: dict[str, str] | None = None, stdout: int | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "kvcontract", *args],
        stdout=subprocess.PIPE if stdout is None else stdout,
        stderr=subprocess.PIPE,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_a_closed_stdout_pipe_ends_quietly() -> None:
    reader, writer = os.pipe()
    os.close(reader)
    try:
        result = kvcontract("config", "schema", stdout=writer)
    finally:
        os.close(writer)
    assert result.returncode == 141
    assert result.stderr == b""


def test_a_full_disk_on_stdout_is_one_line() -> None:
    with open("/dev/full", "wb") as full:
        result = kvcontract("config", "schema", stdout=full.fileno())
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [
        "kvcontract: error: cannot write to standard output: No space left on device"
    ]


def test_a_bad_checks_mode_is_one_line() -> None:
    result = kvcontract("config", "show", env={"KVCONTRACT_CHECKS": "maybe"})
    assert result.returncode == 2
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvcontract: error: KVCONTRACT_CHECKS='maybe' is not understood")


def test_environment_overrides_that_are_not_yaml(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVCONTRACT_MANAGER__CAPACITY", "[unclosed")
    run_cli(capsys, "config", "show").assert_user_error("KVCONTRACT_MANAGER__CAPACITY: not a YAML value")
    run_cli(capsys, "simulate", "--requests", "3").assert_user_error("KVCONTRACT_MANAGER__CAPACITY: not a YAML value")


CONFIGS = [
    (b"manager: {capacity: \xff}", "not UTF-8 text"),
    (b"kv_layout: {num_layers: " + b"7" * 5000 + b"}", "an integer has more than 4300 digits"),
    (b"x: " + b"[" * 100_000 + b"]" * 100_000, "nested deeper than the parser allows"),
    (b"kv_layout: {num_layers: 5000}", "less than or equal to 1024"),
    (b"manager: {capacity: 7PiB}", "more than the limit of 256.0TiB"),
    (b"manager: {capacity: 200GiB}", "physical memory"),
    (b"transfer: {device: 'cuda:7'}\nkv_layout: tiny", "transfer.device: cuda:7 does not exist on this machine"),
    (b"manager: {policy: 'os:getcwd'}\nkv_layout: tiny", "neither a CachePolicy class"),
    (
        b"kv_layout: {block_tokens: 1, offload_block_tokens: 1, num_kv_heads: 1, head_dim: 1, dtype: int8}",
        "whole 8-byte words",
    ),
]


@pytest.mark.parametrize(("text", "expected"), CONFIGS)
def test_hostile_configs(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: bytes, expected: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(text)
    validate = run_cli(capsys, "config", "validate", str(path))
    assert validate.status == 2 and expected in validate.err and "Traceback" not in validate.err
    run_cli(capsys, "simulate", "--config", str(path), "--requests", "3", "--json").assert_user_error(expected)


TRACES = [
    (b'{"hash_ids": [1, 2]}\n\xff\xfe\n', "t.jsonl:2: not UTF-8 text (byte 0xff at column 1)"),
    (b'{"hash_ids": [18446744073709551616]}\n', "t.jsonl:1: 'hash_ids' must be a list of integers in [0, 2**64)"),
    (b'{"hash_ids": [-1]}\n', "t.jsonl:1: 'hash_ids' must be a list of integers"),
    (b'{"hash_ids": [' + b"1" * 5000 + b"]}\n", "t.jsonl:1: not a request: an integer has more than 4300 digits"),
    (b'{"hash_ids": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", "t.jsonl:1: not a request: nested deeper"),
    (b'{"hash_ids": [' + b",".join([b"1"] * 70_000) + b"]}\n", "at most 65536 of them, got a list of 70000 items"),
    (b'{"hash_ids": [1], "timestamp": 1e999}\n', "'timestamp' must be a non-negative integer"),
]


@pytest.mark.parametrize(("text", "expected"), TRACES)
def test_hostile_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: bytes, expected: str) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(text)
    run_cli(capsys, "simulate", "--trace", str(trace), "--json").assert_user_error(expected)


def test_ids_of_2_63_and_more_are_simulated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"hash_ids": [18446744073709551615, 9223372036854775808, 1]}\n' * 4)
    outcome = run_cli(capsys, "simulate", "--trace", str(trace), "--json")
    assert outcome.status == 0, outcome.err
    assert json.loads(outcome.out)["requests"] == 4


@pytest.mark.parametrize("engines", [(), ("--engines", "2")])
@pytest.mark.parametrize("text", [b"", b"\n\n  \n"])
def test_a_trace_without_requests_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: bytes, engines: tuple[str, ...]
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(text)
    run_cli(capsys, "simulate", "--trace", str(trace), *engines).assert_user_error(
        "t.jsonl: no requests (the file is empty or every line is blank)"
    )


@pytest.mark.parametrize("engines", [(), ("--engines", "2")])
def test_requests_replays_the_first_ones_of_a_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], engines: tuple[str, ...]
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(f'{{"hash_ids": [{number}, {number + 1}]}}\n' for number in range(10)))
    outcome = run_cli(capsys, "simulate", "--trace", str(trace), "--requests", "3", *engines, "--json")
    assert outcome.status == 0, outcome.err
    report = json.loads(outcome.out)
    engine_reports = report["engines"] if engines else [report]
    assert sum(engine["requests"] for engine in engine_reports) == 3


def test_requests_are_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    run_cli(capsys, "simulate", "--requests", str(10**12)).assert_user_error("at most 1000000")


def test_a_run_too_big_for_memory_is_refused_before_allocating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"hash_ids": [' + ",".join(map(str, range(60_000))) + "]}\n")
    config = tmp_path / "c.yaml"
    config.write_text(
        "kv_layout: {preset: llama-3.1-70b, block_tokens: 16, offload_block_tokens: 64}\nmanager: {capacity: 4}\n"
    )
    run_cli(capsys, "simulate", "--config", str(config), "--trace", str(trace), "--json").assert_user_error(
        "more than this machine's"
    )


def never_run(*args: object, **kwargs: object) -> object:
    raise AssertionError("the run started before its output paths were checked")


@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_output_paths_are_checked_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    monkeypatch.setattr(sim_run, "run_simulation", never_run)
    name = "out.png"
    run_cli(capsys, "simulate", option, str(tmp_path / "missing" / name)).assert_user_error(
        f"{option} {tmp_path / 'missing' / name}: cannot write in"
    )
    (tmp_path / "folder.png").mkdir()
    run_cli(capsys, "simulate", option, str(tmp_path / "folder.png")).assert_user_error("is a directory")


def test_json_and_plot_files_are_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    figures, plot = tmp_path / "run.json", tmp_path / "run.png"
    outcome = run_cli(capsys, "simulate", "--requests", "30", "--json", str(figures), "--plot", str(plot))
    assert outcome.status == 0, outcome.err
    assert json.loads(figures.read_text())["requests"] == 30
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json", "run.png"]


def test_a_full_disk_while_writing_a_file_is_one_line_and_leaves_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: Path, data: str, encoding: str | None = None) -> int:
        self.write_bytes(b"{")
        raise OSError(28, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_text", full)
    figures = tmp_path / "run.json"
    run_cli(capsys, "simulate", "--requests", "5", "--json", str(figures)).assert_user_error("No space left on device")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv", [("simulate", "--requests", "many"), ("frobnicate",), ("config",), ("simulate", "--seed")]
)
def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    run_cli(capsys, *argv).assert_user_error("error:")
