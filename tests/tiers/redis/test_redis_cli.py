"""``kvcontract simulate`` with a Redis tier: ``--engines`` and the one-line error of an unreachable server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcontract.cli import main
from tests.tiers.redis.support import RedisServer, free_port, redis_config


def test_simulate_engines_on_the_command_line(
    redis_server: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "redis.json"
    path.write_text(json.dumps(redis_config(redis_server.url, "cli")))
    assert main(["simulate", "--config", str(path), "--engines", "2", "--requests", "100", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["requests"] == 100 and len(figures["engines"]) == 2
    assert figures["verified_blocks"] > 0


def test_simulate_with_an_unreachable_redis_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "redis.json"
    config = redis_config(f"redis://127.0.0.1:{free_port()}/0", "gone")
    path.write_text(json.dumps(config))
    assert main(["simulate", "--config", str(path), "--requests", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kvcontract: error: Redis tier: cannot reach") and "\n" not in err


def test_engines_out_of_range_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--engines", "0"]) == 2
    assert "--engines" in capsys.readouterr().err
