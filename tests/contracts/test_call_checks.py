"""Contract calls are checked against the contract's signature, whatever the subclass says."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pytest
from beartype.roar import BeartypeCallHintParamViolation, BeartypeCallHintReturnViolation
from typing_extensions import override

from kvcontract import (
    ContractDefinitionError,
    ContractViolation,
    LookupResult,
    OffloadingManager,
    OffloadKey,
    ReqContext,
)
from kvcontract.enforce import checked, checks_enabled, configure, unchecked
from tests.contracts.support import RecordingManager


@pytest.fixture(autouse=True)
def checks_on() -> Iterator[None]:
    """Every test starts with checks on and leaves them on."""
    configure(checks=True)
    yield
    configure(checks=True)


def one_shot(keys: list[OffloadKey]) -> Iterable[OffloadKey]:
    return (k for k in keys)


NOT_SEQUENCES = ("generator", "list_iterator", "set", "frozenset", "dict_keys", "dict_values")


def not_sequences(keys: list[OffloadKey]) -> dict[str, object]:
    return {
        "generator": one_shot(keys),
        "list_iterator": iter(keys),
        "set": set(keys),
        "frozenset": frozenset(keys),
        "dict_keys": dict.fromkeys(keys).keys(),
        "dict_values": {i: k for i, k in enumerate(keys)}.values(),
    }


@pytest.mark.parametrize("kind", NOT_SEQUENCES)
@pytest.mark.parametrize("method", ["prepare_store", "prepare_load", "touch"])
def test_sequence_parameters_refuse_one_shot_and_unordered(
    manager: RecordingManager, ctx: ReqContext, keys: list[OffloadKey], kind: str, method: str
) -> None:
    bad = not_sequences(keys)[kind]
    with pytest.raises(ContractViolation) as raised:
        getattr(manager, method)(bad, ctx)
    message = str(raised.value)
    assert f"OffloadingManager.{method}() called on RecordingManager.{method}" in message
    assert "parameter 'keys' expects Sequence[OffloadKey]" in message
    assert f"received {kind}" in message
    assert "Fix: pass a list or tuple" in message
    assert isinstance(raised.value.__cause__, BeartypeCallHintParamViolation)
    assert manager.stored == []


def test_iterable_parameters_accept_generators(
    manager: RecordingManager, ctx: ReqContext, keys: list[OffloadKey]
) -> None:
    manager.complete_store(one_shot(keys), ctx)
    assert manager.stored == keys
    manager.complete_load(iter(keys), ctx)


def test_other_wrong_values_name_the_expected_type(manager: RecordingManager, keys: list[OffloadKey]) -> None:
    with pytest.raises(
        ContractViolation,
        match=r"parameter 'req_context' expects ReqContext, received str. Fix: pass a value of type ReqContext",
    ):
        manager.lookup(keys[0], "request-0")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def test_keyword_calls_are_checked(manager: RecordingManager, ctx: ReqContext, keys: list[OffloadKey]) -> None:
    with pytest.raises(ContractViolation, match="parameter 'keys'"):
        manager.touch(keys=set(keys), req_context=ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


class Loose(RecordingManager):
    """Annotates wider than the contract and renames a parameter: the contract still rules."""

    @override
    def touch(self, ks: Iterable[OffloadKey], req_context: object) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]  # renamed on purpose
        self.calls.append("touch")


def test_contract_signature_wins_over_subclass_annotations(ctx: ReqContext, keys: list[OffloadKey]) -> None:
    loose = Loose()
    with pytest.raises(
        ContractViolation,
        match=r"called on Loose.touch: parameter 'ks' expects Sequence\[OffloadKey\], received generator",
    ):
        loose.touch(one_shot(keys), ctx)
    loose.touch(keys, ctx)
    assert loose.calls == ["touch"]


class Liar(RecordingManager):
    """Returns a value its contract does not allow."""

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        return "hit"  # type: ignore[return-value]  # pyright: ignore[reportReturnType]


def test_bad_return_values_are_caught(ctx: ReqContext, keys: list[OffloadKey]) -> None:
    with pytest.raises(ContractViolation) as raised:
        Liar().lookup(keys[0], ctx)
    assert str(raised.value) == (
        "OffloadingManager.lookup() implemented by Liar.lookup returned str, expected "
        "LookupResult. Fix: return what the contract declares."
    )
    assert isinstance(raised.value.__cause__, BeartypeCallHintReturnViolation)


def test_configure_off_leaves_no_wrapper(manager: RecordingManager, ctx: ReqContext, keys: list[OffloadKey]) -> None:
    wrapped = RecordingManager.__dict__["touch"]
    configure(checks=False)
    assert not checks_enabled()
    original = RecordingManager.__dict__["touch"]
    assert original is wrapped.__wrapped__
    assert original.__code__.co_filename.endswith("support.py")
    manager.touch(set(keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    configure(checks=True)
    with pytest.raises(ContractViolation):
        manager.touch(set(keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def test_classes_created_while_off_are_checked_once_on(ctx: ReqContext, keys: list[OffloadKey]) -> None:
    configure(checks=False)

    class LateManager(RecordingManager):
        @override
        def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
            return None

    LateManager().touch(set(keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    configure(checks=True)
    with pytest.raises(ContractViolation):
        LateManager().touch(set(keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


ENV_PROBE = (
    "import kvcontract.enforce as e, tests.contracts.support as c;"
    "print(e.checks_enabled(), hasattr(c.RecordingManager.__dict__['touch'], '__wrapped__'))"
)


@pytest.mark.parametrize(("value", "expected"), [("off", "False False"), ("on", "True True"), ("full", "True True")])
def test_environment_switch(value: str, expected: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", ENV_PROBE],
        env={"KVCONTRACT_CHECKS": value, "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == expected


def test_environment_switch_rejects_unknown_values() -> None:
    """``import kvcontract`` still works, so a command line can report the value in one line."""
    probe = (
        "import kvcontract, kvcontract.enforce as e\n"
        "try:\n    e.checks_mode()\nexcept ValueError as error:\n    print(error)\n"
        "import kvcontract.managers"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env={"KVCONTRACT_CHECKS": "maybe"},
        capture_output=True,
        text=True,
        check=False,
    )
    expected = "KVCONTRACT_CHECKS='maybe' is not understood: set it to one of off, on, full"
    assert result.stdout.startswith(expected)
    assert result.returncode != 0
    assert expected in result.stderr.splitlines()[-1]


class Structural:
    """Implements the manager contract without inheriting it."""

    def __init__(self) -> None:
        self.inner = RecordingManager()

    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        return self.inner.lookup(key, req_context)

    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> object:
        return self.inner.prepare_load(keys, req_context)

    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
        return None

    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> object:
        return self.inner.prepare_store(keys, req_context)

    def complete_store(self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool = True) -> None:
        self.inner.complete_store(keys, req_context, success)

    def on_request_finished(self, req_context: ReqContext) -> None:
        return None

    def take_events(self) -> list[object]:
        return []

    def stats(self) -> object:
        return self.inner.stats()

    def reset_cache(self) -> None:
        return None

    def shutdown(self) -> None:
        return None

    def extra(self) -> str:
        return "forwarded"


def test_checked_gives_structural_implementers_the_same_checks(ctx: ReqContext, keys: list[OffloadKey]) -> None:
    proxy = checked(Structural(), OffloadingManager)
    proxy.complete_store(one_shot(keys), ctx)
    getattr(proxy, "complete_load")(one_shot(keys), ctx)
    assert proxy.lookup(keys[0], ctx) is LookupResult.HIT
    assert proxy.extra() == "forwarded"
    with pytest.raises(
        ContractViolation,
        match=r"OffloadingManager.prepare_store\(\) called on CheckedOffloadingManager.prepare_store: parameter 'keys'",
    ):
        proxy.prepare_store(one_shot(keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def test_checked_refuses_incomplete_objects_and_non_contracts() -> None:
    with pytest.raises(
        ContractDefinitionError,
        match="object does not implement OffloadingManager: missing lookup, prepare_load, prepare_store, reset_cache, stats, touch$",
    ):
        checked(object(), OffloadingManager)
    with pytest.raises(TypeError, match="checked\\(\\) takes a kvcontract contract"):
        checked(Structural(), Structural)


def test_checked_is_identity_while_checks_are_off() -> None:
    configure(checks=False)
    structural = Structural()
    assert checked(structural, OffloadingManager) is structural


def test_slotted_dataclass_implementers_are_wrapped_once(ctx: ReqContext, keys: list[OffloadKey]) -> None:
    """``dataclass(slots=True)`` creates the class twice; the second must not wrap the wrapper."""

    @dataclass(slots=True)
    class Slotted(RecordingManager):
        label: str = ""

        @override
        def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
            return None

    wrapped = Slotted.__dict__["touch"]
    assert wrapped.__wrapped__.__code__.co_filename == __file__
    with pytest.raises(ContractViolation, match="called on .*Slotted.touch"):
        Slotted().touch(set(keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def test_unchecked_calls_the_original_and_leaves_other_callables_alone(
    manager: RecordingManager, ctx: ReqContext, keys: list[OffloadKey]
) -> None:
    touch = unchecked(manager.touch)
    touch(set(keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    assert manager.calls[-1] == f"touch:{len(keys)}"
    assert getattr(touch, "__func__") is RecordingManager.__dict__["touch"].__wrapped__
    with pytest.raises(ContractViolation):
        manager.touch(set(keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    assert unchecked(len) is len
    configure(checks=False)
    assert unchecked(manager.touch) == manager.touch
