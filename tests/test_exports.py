"""Each public package exports exactly the names docs/reference/api.md lists for it.

As trio's ``test_exports.py`` and pydantic's ``test_dunder_all.py``: a name is public by a
decision written down once, so a stray import or a forgotten ``__all__`` entry fails here.
To add a name, add it to the package's ``__all__`` and to the package's line under "Public
names" in docs/reference/api.md; a new public package gets a line there of its own.
"""

from __future__ import annotations

import importlib
import re
import types
from pathlib import Path

import pytest

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "api.md"

REQUIRED = (
    "kvcontract",
    "kvcontract.contracts",
    "kvcontract.managers",
    "kvcontract.policies",
    "kvcontract.tiers",
    "kvcontract.transfer",
    "kvcontract.config",
    "kvcontract.assembly",
    "kvcontract.sim",
    "kvcontract.observe",
    "kvcontract.enforce",
    "kvcontract.lint",
    "kvcontract.metrics",
    "kvcontract.testing",
)
"""Packages that must have a line on the page (the page may list more)."""

_LINE = re.compile(r"^\*\*`(kvcontract(?:\.\w+)*)`\*\* exports:(.*?)(?:\n\n|\Z)", re.MULTILINE | re.DOTALL)
_NAME = re.compile(r"`(\w+)`")


def documented() -> dict[str, list[str]]:
    """Package -> the names its "exports" line on the API page gives, in page order."""
    return {package: _NAME.findall(names) for package, names in _LINE.findall(API_PAGE.read_text(encoding="utf-8"))}


DOCUMENTED = documented()


def test_every_required_package_is_documented() -> None:
    assert sorted(set(REQUIRED) - set(DOCUMENTED)) == []


@pytest.mark.parametrize("package", sorted(DOCUMENTED))
def test_all_is_the_documented_list(package: str) -> None:
    module = importlib.import_module(package)
    exported: list[str] = list(getattr(module, "__all__"))
    names = DOCUMENTED[package]
    assert len(names) == len(set(names)), f"{package} is listed twice on {API_PAGE.name}"
    assert len(exported) == len(set(exported)), f"{package}.__all__ repeats a name"
    missing_from_page = sorted(set(exported) - set(names))
    missing_from_all = sorted(set(names) - set(exported))
    assert (missing_from_page, missing_from_all) == ([], []), (
        f"{package}: add {missing_from_page} to its line in docs/reference/api.md, "
        f"or {missing_from_all} to its __all__ (or drop them from the page)"
    )


@pytest.mark.parametrize("package", sorted(DOCUMENTED))
def test_every_exported_name_exists(package: str) -> None:
    module = importlib.import_module(package)
    absent = [name for name in getattr(module, "__all__") if not hasattr(module, name)]
    assert absent == []


@pytest.mark.parametrize("package", sorted(DOCUMENTED))
def test_nothing_public_is_exported_by_accident(package: str) -> None:
    """What a package's ``__init__`` (or a module) defines or imports without an underscore is in ``__all__``.

    For a plain module only what it defines itself counts: its imports are its own business.
    """
    module = importlib.import_module(package)
    is_package = hasattr(module, "__path__")
    exported = set(getattr(module, "__all__"))
    stray = sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and name not in exported
        and not isinstance(value, types.ModuleType)
        and (is_package or getattr(value, "__module__", None) == package)
    )
    assert stray == [], f"{package} has public names outside __all__: prefix them with _ or export them"
