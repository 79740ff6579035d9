"""What the commands print: what ran and that the check passed, files written, plain lines for a pipe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.support import run_cli

BOX = set("─│┃━┏┓┗┛┡┩└┘├┤┼╇")


def _plain(text: str) -> None:
    """Lines a tool can read: no blank first line, no box drawing, no line cut at 80 columns."""
    lines = text.splitlines()
    assert lines and lines[0].strip(), text
    assert not BOX & set(text), text
    assert max(map(len, lines)) > 80, "a long line was wrapped"


def test_simulate_says_what_ran_and_that_the_check_passed(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = run_cli(capsys, "simulate", "--requests", "40", "--seed", "7")
    assert outcome.status == 0, outcome.err
    _plain(outcome.out)
    first = outcome.out.splitlines()[0]
    assert "built-in workload" in first and "40 requests" in first and "seed 7" in first, first
    assert "lru" in outcome.out and "1,024 host blocks (32.00 MiB)" in outcome.out
    assert "2 layers" in outcome.out and "float16" in outcome.out and "64-token offload blocks" in outcome.out
    assert "check passed:" in outcome.out and "byte for byte" in outcome.out
    assert "hit ratio\t" in outcome.out


def test_simulate_of_a_trace_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"hash_ids": [1, 2, n]}) + "\n" for n in range(5)))
    outcome = run_cli(capsys, "simulate", "--trace", str(trace))
    assert outcome.status == 0, outcome.err
    assert f"trace {trace} (5 requests)" in outcome.out.splitlines()[0]


def test_simulate_says_which_files_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    figures, plot = tmp_path / "run.json", tmp_path / "run.png"
    outcome = run_cli(capsys, "simulate", "--requests", "30", "--json", str(figures), "--plot", str(plot))
    assert outcome.status == 0, outcome.err
    assert f"kvcontract: wrote the figures as JSON to {figures}\n" in outcome.err
    assert f"kvcontract: wrote the plot of the run to {plot}\n" in outcome.err
    assert json.loads(figures.read_text())["requests"] == 30
    assert "check passed:" in outcome.out


def test_json_on_standard_output_stays_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plot = tmp_path / "run.png"
    outcome = run_cli(capsys, "simulate", "--requests", "30", "--json", "--plot", str(plot))
    assert json.loads(outcome.out)["requests"] == 30
    assert f"wrote the plot of the run to {plot}" in outcome.err


def _trace(tmp_path: Path) -> Path:
    trace = tmp_path / "t.jsonl"
    requests = [[1, 2, 3], [1, 2], [4, 5], [1, 2, 3, 6], [4, 5, 7], [1, 2], [4, 5]]
    trace.write_text("".join(json.dumps({"hash_ids": ids}) + "\n" for ids in requests))
    return trace


def test_plan_piped_is_plain_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = run_cli(
        capsys,
        "plan",
        "--trace",
        str(_trace(tmp_path)),
        "--capacities",
        "3,5",
        "--processes",
        "1",
        "--block-bytes",
        "100",
        "--target-hit",
        "0.2",
        "--tiers",
        "host,file",
        "--tier-capacity",
        "file=4",
    )
    assert outcome.status == 0, outcome.err
    _plain(outcome.out)
    assert outcome.err == "", "a progress bar is for a terminal"
    assert "capacity (blocks)\tof unique\tbytes\tlru\tarc\toptimum" in outcome.out
    assert "lru reaches hit ratio 0.2:" in outcome.out


def test_plan_says_which_files_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document, plot = tmp_path / "plan.json", tmp_path / "plan.png"
    outcome = run_cli(
        capsys,
        "plan",
        "--trace",
        str(_trace(tmp_path)),
        "--capacities",
        "3,5",
        "--processes",
        "1",
        "--json",
        str(document),
        "--plot",
        str(plot),
    )
    assert outcome.status == 0, outcome.err
    assert f"kvcontract: wrote the plan as JSON to {document}\n" in outcome.err
    assert f"kvcontract: wrote the plot of the curves to {plot}\n" in outcome.err
    assert json.loads(document.read_text())["capacities"] == [3, 5]


def test_several_engines_piped_are_plain_lines(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = run_cli(capsys, "simulate", "--requests", "20", "--engines", "2")
    assert outcome.status == 0, outcome.err
    assert "engine\trequests\tblocks\thit ratio" in outcome.out
    assert "check passed:" in outcome.out and "2 engines" in outcome.out.splitlines()[0]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import metadata

    outcome = run_cli(capsys, "--version")
    assert (outcome.status, outcome.out) == (0, f"kvcontract {metadata.version('kvcontract')}\n")


@pytest.mark.parametrize(
    ("command", "described"),
    [
        (("simulate",), "Serve a workload"),
        (("plan",), "hit-ratio curve"),
        (("check",), "conformance kit"),
        (("config", "show"), "Print the config"),
        (("config", "validate"), "Check a config file"),
    ],
)
def test_each_command_s_help_says_what_it_does(
    capsys: pytest.CaptureFixture[str], command: tuple[str, ...], described: str
) -> None:
    outcome = run_cli(capsys, *command, "--help")
    assert outcome.status == 0
    description = outcome.out.split("\n\n")[1]
    assert described in " ".join(description.split()), outcome.out


@pytest.mark.parametrize("action", ["show", "validate"])
def test_config_s_file_argument_is_explained(capsys: pytest.CaptureFixture[str], action: str) -> None:
    text = " ".join(run_cli(capsys, "config", action, "--help").out.split())
    assert "file a config file: YAML (.yaml, .yml), TOML (.toml) or JSON (.json)" in text


def test_help_states_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(run_cli(capsys, "simulate", "--help").out.split())
    assert "seed of the built-in workload (default: 0)" in text
    assert "(default: 1)" in text
