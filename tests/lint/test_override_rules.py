"""KVC001 missing-override and KVC002 override-without-base, with every kind of method definition."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lint.support import found, lint_tree, write_tree

BASE = """
import functools
from typing import overload

class Base:
    def plain(self) -> None: ...
    @classmethod
    def cm(cls) -> None: ...
    @staticmethod
    def sm() -> None: ...
    @property
    def prop(self) -> int: return 0
    @property
    def settable(self) -> int: return 0
    @settable.setter
    def settable(self, value: int) -> None: ...
    @functools.cached_property
    def cached(self) -> int: return 0
    def ov(self, x: object) -> object: return x
    def __init__(self) -> None: ...
    def __post_init__(self) -> None: ...
    def __private(self) -> None: ...
    def __call__(self) -> None: ...
"""


def lint_sub(tmp_path: Path, body: str, header: str = "", *, exempt_dunders: bool = False) -> set[tuple[str, int]]:
    """Lint ``class Sub(Base):`` with ``body`` (methods, indented by 4) after imports ``header``."""
    source = "import functools\nfrom typing import overload\nfrom typing_extensions import override\n"
    source += header + "from base_mod import Base\n\nclass Sub(Base):\n" + body
    write_tree(tmp_path, {"base_mod.py": BASE, "sub.py": source})
    offset = source.count("\n", 0, source.index("class Sub")) + 1
    return {
        (code, line - offset)
        for _, line, code in found(lint_tree(tmp_path, ["sub.py"], exempt_dunders=exempt_dunders), tmp_path)
    }


@pytest.mark.parametrize(
    "body",
    [
        "    def plain(self) -> None: ...\n",
        "    @classmethod\n    def cm(cls) -> None: ...\n",
        "    @staticmethod\n    def sm() -> None: ...\n",
        "    @property\n    def prop(self) -> int: return 1\n",
        "    @functools.cached_property\n    def cached(self) -> int: return 1\n",
        "    @functools.lru_cache\n    def plain(self) -> None: ...\n",
        "    async def plain(self) -> None: ...\n",
    ],
)
def test_kvc001_finds_every_kind_of_method(tmp_path: Path, body: str) -> None:
    line = body.count("\n")
    assert lint_sub(tmp_path, body) == {("KVC001", line)}


@pytest.mark.parametrize(
    "body",
    [
        "    @override\n    def plain(self) -> None: ...\n",
        "    @classmethod\n    @override\n    def cm(cls) -> None: ...\n",
        "    @staticmethod\n    @override\n    def sm() -> None: ...\n",
        "    @property\n    @override\n    def prop(self) -> int: return 1\n",
        "    @functools.cached_property\n    @override\n    def cached(self) -> int: return 1\n",
        "    def new_method(self) -> None: ...\n",
        "    def __init__(self) -> None: ...\n",
        "    def __post_init__(self) -> None: ...\n",
        "    def __new__(cls) -> 'Sub': ...\n",
        "    def __init_subclass__(cls) -> None: ...\n",
        "    def __private(self) -> None: ...\n",
    ],
)
def test_kvc001_negative(tmp_path: Path, body: str) -> None:
    assert lint_sub(tmp_path, body) == set()


def test_property_setter_and_deleter_need_it_on_the_getter(tmp_path: Path) -> None:
    body = (
        "    @property\n    def settable(self) -> int: return 1\n"
        "    @settable.setter\n    def settable(self, value: int) -> None: ...\n"
        "    @settable.deleter\n    def settable(self) -> None: ...\n"
    )
    assert lint_sub(tmp_path, body) == {("KVC001", 2)}
    fixed = body.replace("    def settable(self) -> int", "    @override\n    def settable(self) -> int", 1)
    assert lint_sub(tmp_path, fixed) == set()


def test_overloads_need_it_on_the_implementation(tmp_path: Path) -> None:
    body = (
        "    @overload\n    def ov(self, x: int) -> int: ...\n"
        "    @overload\n    def ov(self, x: str) -> str: ...\n"
        "    def ov(self, x: object) -> object: return x\n"
    )
    assert lint_sub(tmp_path, body) == {("KVC001", 5)}
    stubs_only = (
        "    @overload\n    def ov(self, x: int) -> int: ...\n    @overload\n    def ov(self, x: str) -> str: ...\n"
    )
    assert lint_sub(tmp_path, stubs_only) == set()


@pytest.mark.parametrize(
    ("header", "decorator"),
    [
        ("", "override"),
        ("import typing_extensions\n", "typing_extensions.override"),
        ("import typing_extensions as te\n", "te.override"),
        ("from typing_extensions import override as ovr\n", "ovr"),
        ("import typing\n", "typing.override"),
    ],
)
def test_override_aliases_are_recognised(tmp_path: Path, header: str, decorator: str) -> None:
    assert lint_sub(tmp_path, f"    @{decorator}\n    def plain(self) -> None: ...\n", header) == set()


def test_exempt_dunders_option(tmp_path: Path) -> None:
    body = "    def __call__(self) -> None: ...\n    def __repr__(self) -> str: ...\n    def plain(self) -> None: ...\n"
    assert lint_sub(tmp_path, body) == {("KVC001", 1), ("KVC001", 2), ("KVC001", 3)}
    assert lint_sub(tmp_path, body, exempt_dunders=True) == {("KVC001", 3)}


def test_kvc002_override_without_base(tmp_path: Path) -> None:
    body = "    @override\n    def brand_new(self) -> None: ...\n    @override\n    def plain(self) -> None: ...\n"
    assert lint_sub(tmp_path, body) == {("KVC002", 2)}


def test_kvc002_is_not_guessed_under_an_unresolved_base(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "u.py": "from typing_extensions import override\nfrom missing import Base\n\nclass Sub(Base):\n    @override\n    def run(self) -> None: ...\n"
        },
    )
    assert found(lint_tree(tmp_path), tmp_path) == {("u.py", 4, "KVC007")}


def test_decorator_stack_with_wrapping_decorators_counts(tmp_path: Path) -> None:
    header = "def logged(f):\n    return f\n"
    assert lint_sub(tmp_path, "    @logged\n    def plain(self) -> None: ...\n", header) == {("KVC001", 2)}
    assert lint_sub(tmp_path, "    @override\n    @logged\n    def plain(self) -> None: ...\n", header) == set()


def test_members_overridden_by_class_attributes_are_not_methods(tmp_path: Path) -> None:
    assert lint_sub(tmp_path, "    plain = None\n") == set()


def test_class_attribute_in_base_is_overridden_by_method(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.py": "class A:\n    handler = None\n\nclass B(A):\n    def handler(self) -> None: ...\n"})
    assert found(lint_tree(tmp_path), tmp_path) == {("a.py", 5, "KVC001")}


def test_unreachable_methods_are_not_checked(tmp_path: Path) -> None:
    body = "    import sys\n    if sys.version_info < (3, 8):\n        def plain(self) -> None: ...\n"
    assert lint_sub(tmp_path, body) == set()


def test_multiple_inheritance_takes_the_first_base_that_defines_it(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "m.py": """
                from missing import Unknown

                class Known:
                    def run(self) -> None: ...

                class A(Unknown, Known):
                    def run(self) -> None: ...

                class Mid(Unknown):
                    pass

                class B(Mid, Known):
                    def run(self) -> None: ...
                """
        },
    )
    assert found(lint_tree(tmp_path), tmp_path, "KVC001") == {("m.py", 7, "KVC001")}
