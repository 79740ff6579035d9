"""Hierarchy resolution across modules: every way a base class can be named is followed to its class."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvcontract.lint.static_conditions import Target
from tests.lint.support import found, lint_tree, write_tree

BASE = """
class Base:
    def run(self) -> None:
        pass
"""

SUB_LINE = 3  # the ``def run`` line in each subclass module below


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("plain import", "import pkg.base\n\nclass Sub(pkg.base.Base):\n    def run(self) -> None: ...\n"),
        ("from import", "from pkg.base import Base\n\nclass Sub(Base):\n    def run(self) -> None: ...\n"),
        ("relative import", "from .base import Base\n\nclass Sub(Base):\n    def run(self) -> None: ...\n"),
        ("relative package import", "from . import base\n\nclass Sub(base.Base):\n    def run(self) -> None: ...\n"),
        ("import as", "import pkg.base as b\n\nclass Sub(b.Base):\n    def run(self) -> None: ...\n"),
        ("from import as", "from pkg.base import Base as B\n\nclass Sub(B):\n    def run(self) -> None: ...\n"),
        ("init re-export", "from pkg import Base\n\nclass Sub(Base):\n    def run(self) -> None: ...\n"),
        ("star re-export", "from pkg.star import *\n\nclass Sub(Base):\n    def run(self) -> None: ...\n"),
        ("alias module", "from pkg.aliases import Alias\n\nclass Sub(Alias):\n    def run(self) -> None: ...\n"),
        ("subscripted", "from pkg.generic import GBase\n\nclass Sub(GBase[int]):\n    def run(self) -> None: ...\n"),
        (
            "type checking",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.base import Base\nclass Sub(Base):\n    def run(self) -> None: ...\n",
        ),
    ],
)
def test_base_resolves_through(tmp_path: Path, name: str, module: str) -> None:
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.base import Base\n",
            "pkg/base.py": BASE,
            "pkg/star.py": "from pkg.base import Base\n__all__ = ['Base']\n",
            "pkg/aliases.py": "import pkg.base\nAlias = pkg.base.Base\n",
            "pkg/generic.py": "from typing import Generic, TypeVar\nT = TypeVar('T')\nclass GBase(Generic[T]):\n    def run(self) -> None: ...\n",
            "pkg/sub.py": module,
        },
    )
    findings = lint_tree(tmp_path)
    lines = {line for path, line, _ in found(findings, tmp_path, "KVC001") if path == "pkg/sub.py"}
    expected = module.splitlines().index("    def run(self) -> None: ...") + 1
    assert lines == {expected}, (name, findings)
    assert not found(findings, tmp_path, "KVC007"), (name, findings)


def test_nested_class_bases_and_attribute_access(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/outer.py": """
                class Outer:
                    class Inner:
                        def run(self) -> None: ...

                    class Sibling(Inner):
                        def run(self) -> None: ...
                """,
            "app/user.py": """
                from app.outer import Outer

                class FromNested(Outer.Inner):
                    def run(self) -> None: ...
                """,
        },
    )
    assert found(lint_tree(tmp_path), tmp_path, "KVC001") == {
        ("app/outer.py", 6, "KVC001"),
        ("app/user.py", 4, "KVC001"),
    }


def test_class_inside_function_sees_local_imports(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "m/__init__.py": "",
            "m/base.py": BASE,
            "m/user.py": """
                def factory():
                    from m.base import Base

                    class Local(Base):
                        def run(self) -> None: ...

                    return Local
                """,
        },
    )
    assert found(lint_tree(tmp_path), tmp_path, "KVC001") == {("m/user.py", 5, "KVC001")}


def test_type_checking_else_branch_is_unreachable(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "m/__init__.py": "",
            "m/base.py": BASE,
            "m/user.py": """
                from typing import TYPE_CHECKING

                if TYPE_CHECKING:
                    from m.base import Base
                else:
                    Base = object

                class Sub(Base):
                    def run(self) -> None: ...

                if not TYPE_CHECKING:
                    class Hidden(Base):
                        def run(self) -> None: ...
                """,
        },
    )
    assert found(lint_tree(tmp_path), tmp_path) == {("m/user.py", 9, "KVC001")}


def test_version_conditions_follow_the_target(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "v.py": """
                import sys

                if sys.version_info >= (3, 12):
                    class Base:
                        def new(self) -> None: ...
                else:
                    class Base:
                        def old(self) -> None: ...

                class Sub(Base):
                    def new(self) -> None: ...
                    def old(self) -> None: ...
                """
        },
    )
    assert found(lint_tree(tmp_path), tmp_path) == {("v.py", 12, "KVC001")}
    assert found(lint_tree(tmp_path, target=lint_target(3, 12)), tmp_path) == {("v.py", 11, "KVC001")}


def lint_target(major: int, minor: int) -> Target:
    """A target of another Python version."""
    return Target((major, minor), "linux")


@pytest.mark.parametrize(
    ("base", "method"),
    [
        ("object", "__repr__"),
        ("dict", "keys"),
        ("Exception", "__str__"),
        ("enum.Enum", "_missing_"),
        ("collections.OrderedDict", "move_to_end"),
        ("threading.Thread", "run"),
        ("typing.NamedTuple", "_asdict"),
    ],
)
def test_builtins_and_stdlib_resolve(tmp_path: Path, base: str, method: str) -> None:
    write_tree(
        tmp_path,
        {"s.py": f"import collections, enum, threading, typing\n\nclass Sub({base}):\n    def {method}(self): ...\n"},
    )
    assert found(lint_tree(tmp_path), tmp_path) == {("s.py", 4, "KVC001")}


def test_object_ordering_is_not_a_base_method(tmp_path: Path) -> None:
    """typeshed gives ``object`` no ``__lt__``: type checkers reject @override there."""
    write_tree(tmp_path, {"s.py": "class C:\n    def __lt__(self, other): ...\n    def __eq__(self, other): ...\n"})
    assert found(lint_tree(tmp_path), tmp_path) == {("s.py", 3, "KVC001")}


def test_installed_contracts_resolve(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "impl.py": """
                from kvcontract import CachePolicy

                class P(CachePolicy):
                    def clear(self) -> None: ...
                    def extra(self) -> None: ...
                """
        },
    )
    assert found(lint_tree(tmp_path, select=("KVC001",)), tmp_path) == {("impl.py", 4, "KVC001")}


def test_extra_roots(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "shared/lib/base_mod.py": BASE,
            "proj/user.py": "from lib.base_mod import Base\n\nclass Sub(Base):\n    def run(self) -> None: ...\n",
        },
    )
    without = lint_tree(tmp_path / "proj")
    assert found(without, tmp_path / "proj", "KVC007") == {("user.py", 3, "KVC007")}
    with_root = lint_tree(tmp_path / "proj", extra_roots=(str(tmp_path / "shared"),))
    assert found(with_root, tmp_path / "proj") == {("user.py", 4, "KVC001")}


def test_stub_is_preferred_to_source(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "lib/__init__.py": "",
            "lib/impl.py": "class Base:\n    pass\n",
            "lib/impl.pyi": "class Base:\n    def run(self) -> None: ...\n",
            "user.py": "from lib.impl import Base\n\nclass Sub(Base):\n    def run(self) -> None: ...\n",
        },
    )
    assert found(lint_tree(tmp_path, ["user.py"]), tmp_path) == {("user.py", 4, "KVC001")}


def test_instance_attributes_are_base_members(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "a.py": """
                class Base:
                    def __init__(self) -> None:
                        self.name = "x"
                        self.a, self.b = 1, 2

                class Sub(Base):
                    def name(self) -> str: ...
                    def b(self) -> int: ...
                    def c(self) -> int: ...
                """
        },
    )
    assert found(lint_tree(tmp_path), tmp_path) == {("a.py", 7, "KVC001"), ("a.py", 8, "KVC001")}


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("from missing_package import Base\n\nclass Sub(Base):\n    def run(self) -> None: ...\n", "was not found"),
        ("def make():\n    return object\n\nclass Sub(make()):\n    def run(self) -> None: ...\n", "calling make()"),
        (
            "import random\nif random.random() > 0.5:\n    Base = int\nelse:\n    Base = str\n\nclass Sub(Base):\n    def run(self) -> None: ...\n",
            "different values",
        ),
    ],
)
def test_unresolved_base_is_reported(tmp_path: Path, source: str, reason: str) -> None:
    write_tree(tmp_path, {"u.py": source})
    findings = [f for f in lint_tree(tmp_path) if f.code == "KVC007"]
    assert len(findings) == 1 and reason in findings[0].message, findings


def test_unresolved_base_elsewhere_is_reported_on_the_subclass(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "lib/__init__.py": "",
            "lib/mid.py": "from missing_package import Thing\n\nclass Mid(Thing):\n    pass\n",
            "app/user.py": "from lib.mid import Mid\n\nclass Sub(Mid):\n    def run(self) -> None: ...\n",
        },
    )
    findings = lint_tree(tmp_path, ["app/user.py"])
    assert found(findings, tmp_path) == {("app/user.py", 3, "KVC007")}
    assert "lib.mid.Mid" in findings[0].message


def test_unknown_base_still_derives_from_object(tmp_path: Path) -> None:
    """As pyright: a class with no known base also has ``object``, so ``__repr__`` overrides it."""
    write_tree(
        tmp_path, {"u.py": "from missing_package import Base\n\nclass Sub(Base):\n    def __repr__(self) -> str: ...\n"}
    )
    assert found(lint_tree(tmp_path), tmp_path) == {("u.py", 3, "KVC007"), ("u.py", 4, "KVC001")}


def test_class_decorated_by_a_function_returning_any_hides_the_class(tmp_path: Path) -> None:
    """As pyright: the name of a class decorated by a function declared to return ``Any`` is
    ``Any`` (unless the decorator is a bare ``dataclass_transform`` one)."""
    write_tree(
        tmp_path,
        {
            "d.py": """
                from typing import Any
                from typing_extensions import dataclass_transform

                def opaque(cls: type) -> Any:
                    return cls

                @dataclass_transform()
                def model(cls: type | None = None, *, frozen: bool = False) -> Any:
                    return cls

                @opaque
                class Hidden:
                    def run(self) -> None: ...

                @model
                class Kept:
                    def run(self) -> None: ...

                @model(frozen=True)
                class CalledHidden:
                    def run(self) -> None: ...

                class A(Hidden):
                    def run(self) -> None: ...

                class B(Kept):
                    def run(self) -> None: ...

                class C(CalledHidden):
                    def run(self) -> None: ...
                """
        },
    )
    assert found(lint_tree(tmp_path), tmp_path) == {
        ("d.py", 23, "KVC007"),
        ("d.py", 27, "KVC001"),
        ("d.py", 29, "KVC007"),
    }


def test_a_class_statement_wins_over_other_bindings(tmp_path: Path) -> None:
    """``try: from x import B`` / ``except ImportError: class B`` : the class statement declares ``B``."""
    write_tree(
        tmp_path,
        {
            "c.py": """
                try:
                    from missing import Base
                except ImportError:
                    class Base:
                        def run(self) -> None: ...

                class Sub(Base):
                    def run(self) -> None: ...
                """
        },
    )
    assert found(lint_tree(tmp_path), tmp_path) == {("c.py", 8, "KVC001")}


def test_metaclass_attributes_of_type(tmp_path: Path) -> None:
    """As pyright: with a custom metaclass, ``__name__`` and friends are attributes of ``type``."""
    write_tree(
        tmp_path,
        {
            "m.py": """
                class Meta(type):
                    pass

                class Base(metaclass=Meta):
                    pass

                class Sub(Base):
                    def __name__(self) -> str: ...

                class Plain:
                    pass

                class Other(Plain):
                    def __name__(self) -> str: ...
                """
        },
    )
    assert found(lint_tree(tmp_path), tmp_path) == {("m.py", 8, "KVC001")}


def test_classmethod_cls_as_a_base(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "f.py": """
                class Base:
                    def run(self) -> None: ...

                    @classmethod
                    def make(cls) -> type:
                        class Derived(cls):
                            def run(self) -> None: ...

                        return Derived
                """
        },
    )
    assert found(lint_tree(tmp_path), tmp_path) == {("f.py", 7, "KVC001")}


def test_star_import_cycles_are_followed_to_the_definition(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.core import *\nfrom pkg.extra import *\n",
            "pkg/core.py": "class Base:\n    def run(self) -> None: ...\n",
            "pkg/extra.py": "from pkg import Base\n\nclass Sub(Base):\n    def run(self) -> None: ...\n",
        },
    )
    assert found(lint_tree(tmp_path), tmp_path) == {("pkg/extra.py", 4, "KVC001")}


def test_stdlib_names_resolve_by_introspection_and_typeshed_extras(tmp_path: Path) -> None:
    """``types.ModuleType = type(sys)`` and lazy ``concurrent.futures`` names are classes at run
    time; typeshed's extra members (``ModuleType.__getattr__``, ``NodeVisitor.visit_*``) count."""
    write_tree(
        tmp_path,
        {
            "s.py": """
                import ast
                import types
                from concurrent.futures import ProcessPoolExecutor

                class Mod(types.ModuleType):
                    def __getattr__(self, name: str) -> object: ...

                class Visitor(ast.NodeVisitor):
                    def visit_Assign(self, node: ast.Assign) -> None: ...

                class Pool(ProcessPoolExecutor):
                    def submit(self, fn, /, *args, **kwargs): ...
                """
        },
    )
    assert found(lint_tree(tmp_path), tmp_path) == {
        ("s.py", 6, "KVC001"),
        ("s.py", 9, "KVC001"),
        ("s.py", 12, "KVC001"),
    }


def test_a_project_module_does_not_shadow_the_standard_library(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "types.py": "class ModuleType:\n    pass\n",
            "user.py": "import types\n\nclass Mod(types.ModuleType):\n    def __getattr__(self, name: str) -> object: ...\n",
        },
    )
    assert found(lint_tree(tmp_path, ["user.py"]), tmp_path) == {("user.py", 4, "KVC001")}
