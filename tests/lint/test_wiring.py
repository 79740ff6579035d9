"""kvcontract-lint as flake8 plugin and pre-commit hook: the wiring other tools rely on."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TypeGuard

import pytest
import yaml

from kvcontract.lint.flake8_plugin import KVContractFlake8
from tests.lint.support import write_tree

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "class Item:\n    def __repr__(self) -> str:\n        return 'x'\n\n    def __str__(self) -> str:  # noqa: KVC001\n        return 'x'\n"


def test_flake8_plugin_called_as_flake8_does(tmp_path: Path) -> None:
    write_tree(tmp_path, {"item.py": SOURCE})
    path = tmp_path / "item.py"
    lines = path.read_text().splitlines(keepends=True)
    plugin = KVContractFlake8(ast.parse("".join(lines)), str(path), lines)
    results = list(plugin.run())
    assert [(line, col, msg.split()[0]) for line, col, msg, _ in results] == [(2, 8, "KVC001"), (5, 8, "KVC001")]
    assert all(kind is KVContractFlake8 for *_, kind in results)
    assert KVContractFlake8.name == "kvcontract-lint" and KVContractFlake8.version


def test_flake8_plugin_reports_syntax_errors(tmp_path: Path) -> None:
    write_tree(tmp_path, {"bad.py": "def broken(:\n"})
    plugin = KVContractFlake8(ast.Module(body=[], type_ignores=[]), str(tmp_path / "bad.py"))
    assert [msg.split()[0] for _, _, msg, _ in plugin.run()] == ["KVC000"]


@pytest.mark.skipif(
    shutil.which("flake8") is None and not (Path(sys.executable).parent / "flake8").exists(),
    reason="flake8 not installed",
)
def test_flake8_runs_the_plugin_and_applies_noqa(tmp_path: Path) -> None:
    write_tree(tmp_path, {"item.py": SOURCE})
    done = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "KVC", "item.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "item.py:2:9: KVC001 method '__repr__' of class 'Item' overrides builtins.object.__repr__ without @override"
    ]


def _is_list(value: object) -> TypeGuard[list[object]]:
    return isinstance(value, list)


def _is_hook_list(value: object) -> TypeGuard[list[dict[str, object]]]:
    return _is_list(value) and all(isinstance(item, dict) for item in value)


def test_pre_commit_hooks_file_shape() -> None:
    loaded: object = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert _is_hook_list(loaded)
    hooks = loaded
    assert {h["id"] for h in hooks} == {"kvcontract-lint", "kvcontract-lint-fix"}
    for hook in hooks:
        assert {"id", "name", "entry", "language"} <= set(hook)
        assert hook["language"] == "python"
        assert str(hook["entry"]).split()[0] == "kvcontract-lint"
        assert hook["types_or"] == ["python", "pyi"]
        assert hook["require_serial"] is True
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'kvcontract-lint = "kvcontract.lint.cli:main"' in pyproject
    assert 'KVC = "kvcontract.lint.flake8_plugin:KVContractFlake8"' in pyproject


def test_console_script_runs_as_pre_commit_would(tmp_path: Path) -> None:
    write_tree(tmp_path, {"item.py": SOURCE})
    done = subprocess.run(
        [sys.executable, "-m", "kvcontract.lint.cli", "item.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1 and done.stdout.startswith("item.py:2:9: KVC001"), done
