"""matplotlib is the ``plot`` extra: never imported by ``import kvcontract``, named when missing."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import kvcontract.sim.run as sim_run
from tests.cli.support import run_cli

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_matplotlib_is_an_extra_not_a_dependency() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert not any(dependency.startswith("matplotlib") for dependency in project["dependencies"])
    assert any(dependency.startswith("matplotlib") for dependency in project["optional-dependencies"]["plot"])


def test_importing_kvcontract_and_its_command_does_not_import_matplotlib() -> None:
    code = (
        "import sys, kvcontract, kvcontract.cli, kvcontract.config, kvcontract.sim, kvcontract.sim.report, "
        "kvcontract.sim.run; print('matplotlib' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_plot_without_matplotlib_is_one_line_naming_the_extra_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)

    def never_run(*args: object, **kwargs: object) -> object:
        raise AssertionError("the run started although the plot cannot be drawn")

    monkeypatch.setattr(sim_run, "run_simulation", never_run)
    run_cli(capsys, "simulate", "--plot", str(tmp_path / "p.png")).assert_user_error(
        "--plot: plots need matplotlib: pip install 'kvcontract[plot]'"
    )
