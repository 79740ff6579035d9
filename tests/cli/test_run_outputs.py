"""What a run's outputs say so that a reader can judge them: the bound, the tiers' state, the run's identity,
the what-if's rate and error, the copy loop, and what the options asked that the trace could not give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcontract.arguments import installed_version
from kvcontract.sim.hit_bound import unbounded_hit_ratio
from kvcontract.sim.workload import conversation_workload
from tests.cli.support import run_cli


def test_the_json_names_its_run_and_the_bound_beside_the_hit_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = run_cli(capsys, "simulate", "--requests", "200", "--seed", "4", "--json")
    figures = json.loads(outcome.out)
    run = figures["run"]
    assert run["kvcontract_version"] == installed_version() and run["seed"] == 4 and run["trace"] is None
    assert run["requests_asked"] == 200 and run["engines"] == 1 and len(run["config_fingerprint"]) == 16
    assert figures["hit_ratio_bound"] == unbounded_hit_ratio(conversation_workload(200, 4))
    assert figures["hit_ratio"] <= figures["hit_ratio_bound"]
    assert figures["copy_path"].startswith("cpu-threads")


def test_the_config_fingerprint_changes_with_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "kv_layout: {preset: tiny, block_tokens: 16, offload_block_tokens: 64}\nmanager: {capacity: 512}\n"
    )
    default = json.loads(run_cli(capsys, "simulate", "--requests", "5", "--json").out)["run"]
    given = json.loads(run_cli(capsys, "simulate", "--config", str(config), "--requests", "5", "--json").out)["run"]
    assert default["config_fingerprint"] != given["config_fingerprint"]


def test_the_table_shows_the_bound_the_copy_loop_and_one_unit_of_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    table = run_cli(capsys, "simulate", "--requests", "100").out
    assert "(cold-start bound 0." in table and ": room for every block)" in table
    assert "copy loop\tcpu-threads" in table
    assert "transfer GiB/s" in table and "GB/s" not in table


def test_more_requests_than_the_trace_holds_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "one.jsonl"
    trace.write_text('{"hash_ids": [1, 2, 3]}\n')
    outcome = run_cli(capsys, "simulate", "--trace", str(trace), "--requests", "50", "--json")
    assert outcome.status == 0
    assert "kvcontract: --requests 50: the trace holds 1 request, all of them served" in outcome.err


def test_engines_without_tiers_do_not_claim_to_share(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_cli(capsys, "simulate", "--engines", "2", "--requests", "20").out
    assert "sharing" not in out
    assert "2 engines with their own host memory and no tier to share" in out


def test_a_tier_that_never_answered_is_flagged_in_the_summary_and_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("redis", reason="redis-py not installed (extra kvcontract[redis])")
    config = tmp_path / "down.yaml"
    config.write_text(
        "kv_layout: {preset: tiny, block_tokens: 16, offload_block_tokens: 64}\n"
        "manager:\n  kind: tiering\n  primary: {kind: cpu, capacity: 64}\n  secondary:\n"
        '    - {kind: redis, url: "redis://127.0.0.1:1/0", start_degraded: true, connect_timeout: 0.2,'
        " socket_timeout: 0.2, retry_interval: 60}\n"
    )
    figures = json.loads(run_cli(capsys, "simulate", "--config", str(config), "--requests", "10", "--json").out)
    assert [tier["reachable"] for tier in figures["tiers"]] == [False]
    out = run_cli(capsys, "simulate", "--config", str(config), "--requests", "10").out
    assert "RedisTier: state\tUNREACHABLE" in out
    assert "warning: RedisTier's store did not answer at the end of the run" in out


def test_the_whatif_shows_the_rate_it_ran_at_and_its_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "whatif.yaml"
    config.write_text("kv_layout: tiny\nmanager: {kind: cpu, capacity: 200}\nobserve: {whatif: {sample_rate: 0.01}}\n")
    figures = json.loads(run_cli(capsys, "simulate", "--config", str(config), "--requests", "300", "--json").out)
    whatif = figures["whatif"]
    assert whatif["requested_rate"] == 0.01 < whatif["sample_rate"]
    assert set(whatif["errors"]) >= {"current", "capacity 2", "policy arc"}
    out = run_cli(capsys, "simulate", "--config", str(config), "--requests", "300").out
    assert f"sampled at {whatif['sample_rate']:g}; the config's 0.01 raised" in out
    assert " ± " in out


def test_a_hit_ratio_above_the_bound_says_a_tier_kept_blocks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "file.yaml"
    config.write_text(
        "kv_layout: {preset: tiny, block_tokens: 16, offload_block_tokens: 64}\n"
        "manager:\n  kind: tiering\n  primary: {kind: cpu, capacity: 64}\n"
        f"  secondary:\n    - {{kind: file, path: {tmp_path / 'blocks'}, capacity: 1MiB}}\n"
    )
    first = run_cli(capsys, "simulate", "--config", str(config), "--requests", "3").out
    assert "held blocks from before" not in first
    second = run_cli(capsys, "simulate", "--config", str(config), "--requests", "3").out
    assert "; above it, a persistent or shared tier held blocks from before the run)" in second
