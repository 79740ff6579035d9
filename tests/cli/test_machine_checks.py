"""``config validate`` and ``simulate`` ask one machine check: what one refuses the other refuses, in the same line."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.cli.support import run_cli

LAYOUT = "kv_layout: {preset: tiny, block_tokens: 16, offload_block_tokens: 64}\n"


def tiering(root: Path | str, capacity: str = "1MiB") -> str:
    return (
        LAYOUT + "manager:\n  kind: tiering\n  primary: {kind: cpu, capacity: 64}\n"
        f"  secondary:\n    - {{kind: file, path: {root}, capacity: {capacity}}}\n"
    )


def under_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return tiering("/proc/kvcontract-tier")


def open_to_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    root = tmp_path / "loose"
    root.mkdir()
    root.chmod(0o777)
    return tiering(root)


def one_mib_free(path: object) -> SimpleNamespace:
    return SimpleNamespace(total=1 << 40, used=1 << 40, free=1 << 20)


def over_free_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(shutil, "disk_usage", one_mib_free)
    return tiering(tmp_path / "blocks", "8MiB")


@pytest.mark.parametrize(
    ("machine", "line"),
    [
        (under_proc, "manager.secondary.0.path: /proc/kvcontract-tier is under /proc"),
        (open_to_all, "manager.secondary.0.path: file tier root"),
        (over_free_disk, "manager.secondary.0.capacity: 8.0MiB is more than the 1.0MiB free on the disk"),
    ],
)
def test_validate_and_simulate_refuse_the_same_file_tier_with_the_same_line(
    machine: Callable[[Path, pytest.MonkeyPatch], str],
    line: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "tier.yaml"
    config.write_text(machine(tmp_path, monkeypatch))
    validate = run_cli(capsys, "config", "validate", str(config))
    simulate = run_cli(capsys, "simulate", "--config", str(config), "--requests", "3", "--json")
    assert validate.status == simulate.status == 2, (validate.err, simulate.err)
    problem = next(text.strip() for text in validate.err.splitlines() if line in text)
    simulate.assert_user_error(f"kvcontract: error: {config}: {problem}")


def test_a_tier_that_fits_is_ok_in_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tier.yaml"
    config.write_text(tiering(tmp_path / "blocks"))
    assert run_cli(capsys, "config", "validate", str(config)).status == 0
    assert run_cli(capsys, "simulate", "--config", str(config), "--requests", "3", "--json").status == 0
