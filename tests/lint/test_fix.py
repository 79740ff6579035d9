"""``--fix`` against golden files: exact output, idempotent, lint-clean, and the fixed code imports."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from kvcontract.lint.cli import main
from kvcontract.lint.fix import fix_files, fix_source
from kvcontract.lint.static_conditions import Target
from tests.lint.support import lint_tree, settings, write_tree

FIXTURES = Path(__file__).parent / "fixtures" / "fix"
CASES = sorted(p.name for p in (FIXTURES / "cases").glob("*.py"))


def _import(path: Path) -> None:
    spec = importlib.util.spec_from_file_location(f"fixed_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]


@pytest.mark.parametrize("case", CASES)
def test_fix_matches_golden_and_is_idempotent(tmp_path: Path, case: str) -> None:
    target = tmp_path / case
    shutil.copyfile(FIXTURES / "cases" / case, target)
    first = fix_files([str(target)], settings(tmp_path))
    assert first.applied > 0
    target.write_bytes(first.fixed[str(target)].encode(first.encodings[str(target)]))
    assert target.read_bytes() == (FIXTURES / "golden" / case).read_bytes()
    second = fix_files([str(target)], settings(tmp_path))
    assert second.applied == 0 and second.fixed == {}
    remaining = {f.code for f in lint_tree(tmp_path, [case])}
    assert not remaining & {"KVC001", "KVC004"}
    _import(target)


def test_fix_uses_typing_from_python_312(tmp_path: Path) -> None:
    source = "class Item:\n    def __repr__(self) -> str:\n        return 'x'\n"
    write_tree(tmp_path, {"item.py": source})
    outcome = fix_files([str(tmp_path / "item.py")], settings(tmp_path, target=Target((3, 12), "linux")))
    assert outcome.fixed[str(tmp_path / "item.py")].startswith("from typing import override\n")


def test_fix_renames_the_import_when_override_is_taken(tmp_path: Path) -> None:
    source = "override = 'something else'\n\nclass Item:\n    def __repr__(self) -> str:\n        return 'x'\n"
    write_tree(tmp_path, {"item.py": source})
    outcome = fix_files([str(tmp_path / "item.py")], settings(tmp_path))
    fixed = outcome.fixed[str(tmp_path / "item.py")]
    assert "from typing_extensions import override as _override\n" in fixed and "    @_override\n" in fixed
    (tmp_path / "item.py").write_text(fixed)
    assert lint_tree(tmp_path) == []


def test_fix_source_without_findings_changes_nothing() -> None:
    text = "x = 1\n"
    assert fix_source(text, []) == (text, 0)


def test_cli_fix_writes_and_diff_does_not(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = "class Item:\n    def __repr__(self) -> str:\n        return 'x'\n"
    write_tree(tmp_path, {"item.py": source})
    path = tmp_path / "item.py"
    assert main(["--diff", str(path)]) == 1
    out = capsys.readouterr().out
    assert "+    @override" in out and "+from typing_extensions import override" in out
    assert path.read_text() == source
    assert main(["--fix", str(path)]) == 0
    assert "@override" in path.read_text()
    assert main(["--diff", str(path)]) == 0


@pytest.mark.parametrize(
    ("imports", "target", "expected"),
    [
        (  # third-party beside the project's own: its sorted place in that block
            "from __future__ import annotations\n\nimport os\n\nfrom kvcontract.policies import PolicyBase\n"
            "from zzz import thing\n",
            (3, 11),
            "import os\n\nfrom kvcontract.policies import PolicyBase\nfrom typing_extensions import override\n"
            "from zzz import thing\n",
        ),
        (  # no block of its section: one of its own, between the sections before and after it
            "from __future__ import annotations\n\nfrom kvcontract.policies import PolicyBase\n",
            (3, 12),
            "from __future__ import annotations\n\nfrom typing import override\n\nfrom kvcontract.policies import PolicyBase\n",
        ),
    ],
)
def test_the_import_fix_adds_is_sorted(imports: str, target: tuple[int, int], expected: str, tmp_path: Path) -> None:
    path = tmp_path / "policy.py"
    path.write_text(f"{imports}\n\nclass P(PolicyBase):\n    def clear(self) -> None:\n        pass\n")
    outcome = fix_files([str(path)], settings(tmp_path, target=Target(target, "linux")))
    assert expected in outcome.fixed[str(path)]
