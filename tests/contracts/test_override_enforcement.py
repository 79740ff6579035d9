"""Class creation fails for overrides without @override, naming each method and its base."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

import pytest
from typing_extensions import override

from kvcontract import CachePolicy, ContractDefinitionError, ContractViolation, OffloadKey, ReqContext
from kvcontract.enforce import configure, unchecked
from tests.contracts.support import RecordingManager, logged


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
    assert "lookup (overrides tests.contracts.support.RecordingManager.lookup)" in message
    assert "touch (overrides tests.contracts.support.RecordingManager.touch)" in message
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


DOWNSTREAM = """
from collections.abc import Sequence
from typing_extensions import override
from kvcontract import BlockStatus, CachePolicy, OffloadKey


class MyPolicy(CachePolicy):
    @override
    def get(self, key: OffloadKey) -> BlockStatus | None:
        return None

    def touch(self, keys: Sequence[OffloadKey]) -> None:
        return None
"""


def test_downstream_module_fails_at_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "downstream_policy.py").write_text(DOWNSTREAM)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.delitem(sys.modules, "downstream_policy", raising=False)
    with pytest.raises(
        ContractDefinitionError,
        match=r"downstream_policy.MyPolicy overrides without @override: touch \(overrides kvcontract.contracts.policy.CachePolicy.touch\)",
    ):
        importlib.import_module("downstream_policy")


@pytest.fixture(params=[False, True], ids=["checks-off", "checks-on"])
def checks(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Runs a test with checks off, then on, and leaves them on."""
    enabled: bool = request.param
    configure(checks=enabled)
    yield enabled
    configure(checks=True)


class Kinds(RecordingManager):
    """Contract methods implemented as staticmethods and a classmethod, each with @override.

    The type checkers call such overrides incompatible; at run time Python binds them as
    written, and the checks must not change that.
    """

    shut: ClassVar[bool] = False

    @staticmethod
    @override
    def reset_cache() -> None:  # pyright: ignore[reportIncompatibleMethodOverride]  # the case under test
        return None

    @classmethod
    @override
    def shutdown(cls) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]  # the case under test
        cls.shut = True

    @override
    @staticmethod
    def on_request_finished(req_context: ReqContext) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]  # the case under test
        return None


def test_static_and_class_methods_behave_alike_with_checks_on_and_off(checks: bool, ctx: ReqContext) -> None:
    instance = Kinds()
    instance.reset_cache()
    Kinds.reset_cache()
    instance.on_request_finished(ctx)
    instance.shutdown()
    Kinds.shutdown()
    assert Kinds.shut
    assert isinstance(Kinds.__dict__["reset_cache"], staticmethod)
    assert isinstance(Kinds.__dict__["shutdown"], classmethod)
    assert unchecked(instance.shutdown)() is None
    assert unchecked(instance.reset_cache)() is None


def test_static_method_arguments_are_checked_against_the_contract_after_self(ctx: ReqContext) -> None:
    kinds = Kinds
    with pytest.raises(
        ContractViolation,
        match=r"OffloadingManager.on_request_finished\(\) called on .*Kinds.on_request_finished: parameter 'req_context' expects ReqContext, received str",
    ):
        kinds().on_request_finished("request-0")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    configure(checks=False)
    kinds().on_request_finished("request-0")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    configure(checks=True)


class TouchMixin:
    """A plain mixin, outside the contract hierarchy, that implements a contract method."""

    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
        self.touched = len(keys)


class MarkedTouchMixin:
    """The same mixin with @override, as a mixin that inherits nothing can only carry at run time."""

    @override
    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:  # type: ignore[misc]  # pyright: ignore[reportGeneralTypeIssues]  # noqa: KVC002  # no base of the mixin defines touch
        self.touched = len(keys)


def test_mixin_contract_methods_need_override() -> None:
    with pytest.raises(ContractDefinitionError) as raised:
        type("Mixed", (TouchMixin, RecordingManager), {})
    message = str(raised.value)
    assert (
        "Mixed overrides without @override: touch (from mixin "
        "tests.contracts.test_override_enforcement.TouchMixin, overrides "
        "tests.contracts.support.RecordingManager.touch)"
    ) in message
    assert "should inherit the contract" in message


def test_mixin_contract_methods_need_override_with_checks_off_too() -> None:
    configure(checks=False)
    try:
        with pytest.raises(ContractDefinitionError, match=r"touch \(from mixin"):
            type("Mixed", (TouchMixin, RecordingManager), {})
    finally:
        configure(checks=True)


def test_mixin_contract_methods_are_wrapped_like_any_other(
    checks: bool, ctx: ReqContext, keys: list[OffloadKey]
) -> None:
    class Mixed(MarkedTouchMixin, RecordingManager):
        pass

    class Derived(Mixed):
        pass

    for cls in (Mixed, Derived):
        instance = cls()
        instance.touch(keys, ctx)
        assert getattr(instance, "touched") == len(keys)
        if checks:
            with pytest.raises(ContractViolation, match=rf"called on .*\b{cls.__name__}\.touch: parameter 'keys'"):
                instance.touch(set(keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
        else:
            instance.touch(set(keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    assert ("touch" in Mixed.__dict__) is checks
    assert MarkedTouchMixin.__dict__["touch"].__code__.co_filename == __file__  # the mixin itself is untouched


def test_mixin_wrappers_follow_configure(ctx: ReqContext, keys: list[OffloadKey]) -> None:
    class Mixed(MarkedTouchMixin, RecordingManager):
        pass

    configure(checks=False)
    try:
        assert "touch" not in Mixed.__dict__
        Mixed().touch(set(keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    finally:
        configure(checks=True)
    with pytest.raises(ContractViolation):
        Mixed().touch(set(keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def test_mixins_that_implement_no_contract_method_are_left_alone() -> None:
    class Labels:
        def __repr__(self) -> str:  # type: ignore[explicit-override]  # pyright: ignore[reportImplicitOverride]  # a library mixin, outside our rules
            return "labelled"

        def label(self) -> str:
            return "x"

    mixed = type("Mixed", (Labels, RecordingManager), {})
    assert repr(mixed()) == "labelled"
    assert "label" not in mixed.__dict__
