"""Module summaries: relative imports, static conditions, ``__all__`` and code-flow bindings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kvcontract.lint.module_walker import absolute_module, summarize_source
from kvcontract.lint.static_conditions import Target, static_truth
from tests.lint.support import TARGET, found, lint_tree, write_tree


@pytest.mark.parametrize(
    ("current", "is_package", "module", "level", "expected"),
    [
        ("pkg.mod", False, "base", 1, "pkg.base"),
        ("pkg", True, "base", 1, "pkg.base"),
        ("pkg.sub.mod", False, None, 2, "pkg"),
        ("pkg.sub.mod", False, "other", 2, "pkg.other"),
        ("pkg.sub", True, "x", 2, "pkg.x"),
        ("top", False, "abs.name", 0, "abs.name"),
    ],
)
def test_absolute_module(current: str, is_package: bool, module: str | None, level: int, expected: str) -> None:
    assert absolute_module(current, is_package, module, level) == expected


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("TYPE_CHECKING", True),
        ("t.TYPE_CHECKING", True),
        ("not TYPE_CHECKING", False),
        ("sys.platform == 'linux'", True),
        ("sys.platform != 'linux'", False),
        ("s.platform == 'win32'", False),
        ("os.name == 'nt'", False),
        ("sys.version_info[0] >= 3", True),
        ("sys.version_info >= (3, 11) and TYPE_CHECKING", True),
        ("sys.version_info >= (3, 12) or False", False),
        ("some_flag", None),
        ("sys.version_info >= (3, 11) and some_flag", None),
    ],
)
def test_static_truth(condition: str, expected: bool | None) -> None:
    node = ast.parse(condition, mode="eval").body
    assert static_truth(node, Target((3, 11), "linux"), {"sys", "s"}, {"typing", "t"}, {"os"}) is expected


def test_all_restricts_star_imports(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "lib.py": "class Public:\n    def run(self) -> None: ...\n\nclass Hidden:\n    def run(self) -> None: ...\n\n__all__ = ['Public']\n__all__ += []\n",
            "user.py": "from lib import *\n\nclass A(Public):\n    def run(self) -> None: ...\n\nclass B(Hidden):\n    def run(self) -> None: ...\n",
        },
    )
    assert found(lint_tree(tmp_path, ["user.py"]), tmp_path) == {("user.py", 4, "KVC001"), ("user.py", 6, "KVC007")}


def test_bindings_follow_code_flow() -> None:
    source = b"""
import sys
class A: pass
class B: pass
X = A
X = B
if sys.version_info >= (3, 12):
    Y = A
try:
    from somewhere import Z
except ImportError:
    Z = A
del X
"""
    summary = summarize_source(source, "m.py", "m", False, TARGET)
    assert len(summary.exports["X"]) == 1 and summary.exports["X"][0] < 0
    assert "Y" not in summary.exports
    assert len(summary.exports["Z"]) == 2


def test_syntax_errors_are_summarized_not_raised() -> None:
    summary = summarize_source(b"def broken(:\n", "bad.py", "bad", False, TARGET)
    assert summary.error is not None and summary.error.line == 1 and summary.classes == ()


def test_instance_attributes_and_slots_are_members() -> None:
    source = b"""
class A:
    __slots__ = ('slot',)
    def __init__(this) -> None:
        this.x = 1
        this.a, (this.b, *this.c) = 1, (2, 3)
        with open('f') as this.handle:
            pass
        for this.i in range(3):
            pass
    def other(self) -> None:
        self.y: int = 2
        self.z += 1
"""
    names = summarize_source(source, "a.py", "a", False, TARGET).classes[0].names
    assert {"slot", "x", "a", "b", "c", "handle", "i", "y", "z"} <= names
