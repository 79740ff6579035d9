"""``kvcontract simulate --engines 2`` with a Mooncake tier: both engines hit what the other stored, every loaded block checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcontract.cli import main
from tests.tiers.mooncake.support import MooncakeStore


def test_simulate_engines_on_the_command_line(
    mooncake_store: MooncakeStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mooncake.json"
    path.write_text(json.dumps(mooncake_store.simulation_config("cli-json")))
    assert main(["simulate", "--config", str(path), "--engines", "2", "--requests", "200", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["requests"] == 200 and len(figures["engines"]) == 2
    assert figures["hit_blocks"] > 0 and figures["verified_blocks"] > 0
    assert figures["failed_stores"] == figures["failed_loads"] == figures["identity_mismatches"] == 0
    promoted = [sum(tier["promoted"] for tier in engine["tiers"]) for engine in figures["engines"]]
    assert all(count > 0 for count in promoted), "each engine loads blocks from the shared store"


def test_simulate_engines_prints_the_passed_check(
    mooncake_store: MooncakeStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mooncake.json"
    path.write_text(json.dumps(mooncake_store.simulation_config("cli-text")))
    assert main(["simulate", "--config", str(path), "--engines", "2", "--requests", "200"]) == 0
    out = capsys.readouterr().out
    assert "mooncake" in out.lower(), "the heading names the tier"
    assert "check passed: all" in out and "byte for byte" in out
