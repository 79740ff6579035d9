"""Class creation fails for overrides without @override, naming each method and its base."""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from typing_extensions import ParamSpec

import pytest
from typing_extensions import override

from kvcontract import CachePolicy, ContractDefinitionError, OffloadKey, ReqContext
from tests.contracts.conftest import RecordingManager

_P = ParamSpec("_P")
_R = TypeVar("_R")


def logged(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """A wrapping decorator, as a downstream author might stack on a method."""

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return function(*args, **kwargs)

    return wrapper


def define_forgetful() -> type:
    """Two overrides without @override."""

    class Forgetful(RecordingManager):
        def lookup(self, key: OffloadKey, req_context: ReqContext) -> object:  # type: ignore[explicit-override, override]  # pyright: ignore[reportImplicitOverride, reportIncompatibleMethodOverride]
            return None

        def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:  # type: ignore[explicit-override]  # pyright: ignore[reportImplicitOverride]
            return None

    return Forgetful


def define_shown() -> type:
    """An undecorated __repr__, which overrides object's."""

    class Shown(RecordingManager):
        def __repr__(self) -> str:  # type: ignore[explicit-override]  # pyright: ignore[reportImplicitOverride]
            return "Shown()"

    return Shown


def test_missing_override_names_every_method_and_base() -> None:
    with pytest.raises(ContractDefinitionError) as raised:
        define_forgetful()
    message = str(raised.value)
    assert "Forgetful overrides without @override" in message
    assert "lookup (overrides tests.contracts.conftest.RecordingManager.lookup)" in message
    assert "touch (overrides tests.contracts.conftest.RecordingManager.touch)" in message
    assert "from typing_extensions import override" in message
    assert isinstance(raised.value, TypeError)


def test_object_methods_need_override_too() -> None:
    with pytest.raises(ContractDefinitionError, match=r"__repr__ \(overrides builtins.object.__repr__\)"):
        define_shown()


def test_decorated_overrides_are_seen_through() -> None:
    class Decorated(RecordingManager):
        @override
        def __repr__(self) -> str:
            return "Decorated()"

        @logged
        @override
        def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
            return None

    assert repr(Decorated()) == "Decorated()"


class Base:
    """A plain base with every kind of method."""

    def method(self) -> int:
        return 0

    @classmethod
    def factory(cls) -> int:
        return 0

    @staticmethod
    def helper() -> int:
        return 0

    @property
    def size(self) -> int:
        return 0


class PolicyBase(CachePolicy, Base):
    """A contract implementer mixing in Base, so overrides of Base are enforced too."""


def one(*args: object) -> int:
    """A method body for any kind of method."""
    return 1


@pytest.mark.parametrize("kind", ["method", "factory", "helper", "size"])
def test_every_method_kind_needs_override(kind: str) -> None:
    namespace: dict[str, object] = {
        "method": one,
        "factory": classmethod(one),
        "helper": staticmethod(one),
        "size": property(one),
    }
    with pytest.raises(ContractDefinitionError, match=rf"{kind} \(overrides .*Base\.{kind}\)"):
        type("Child", (PolicyBase,), {kind: namespace[kind]})


def test_every_method_kind_accepts_override() -> None:
    class Child(Base):
        @override
        def method(self) -> int:
            return 1

        @classmethod
        @override
        def factory(cls) -> int:
            return 1

        @staticmethod
        @override
        def helper() -> int:
            return 1

        @property
        @override
        def size(self) -> int:
            return 1

    type("Enforced", (Child, PolicyBase), {})


def test_pyright_exemptions() -> None:
    exempt: dict[str, object] = {
        "__init__": one,
        "__post_init__": one,
        "__init_subclass__": classmethod(one),
        "_Exempt__mangled": one,
    }
    assert type("Exempt", (RecordingManager,), exempt).__name__ == "Exempt"


def test_dataclass_generated_methods_are_not_flagged() -> None:
    @dataclass
    class Labelled(RecordingManager):
        label: str = ""

    assert Labelled("x") == Labelled("x")
    assert "label='x'" in repr(Labelled("x"))


def test_protocol_extensions_are_contracts_not_implementations() -> None:
    class Extended(CachePolicy, Protocol):
        def touch(self, keys: Sequence[OffloadKey]) -> None:  # type: ignore[explicit-override]  # pyright: ignore[reportImplicitOverride]
            return None

    assert Extended.__name__ == "Extended"


DOWNSTREAM = '''
from collections.abc import Sequence
from typing_extensions import override
from kvcontract import BlockStatus, CachePolicy, OffloadKey


class MyPolicy(CachePolicy):
    @override
    def get(self, key: OffloadKey) -> BlockStatus | None:
        return None

    def touch(self, keys: Sequence[OffloadKey]) -> None:
        return None
'''


def test_downstream_module_fails_at_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "downstream_policy.py").write_text(DOWNSTREAM)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.delitem(sys.modules, "downstream_policy", raising=False)
    with pytest.raises(ContractDefinitionError, match=r"downstream_policy.MyPolicy overrides without @override: touch \(overrides kvcontract.contracts.policy.CachePolicy.touch\)"):
        importlib.import_module("downstream_policy")
