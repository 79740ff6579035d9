"""Class creation refuses an override that narrows its contract's hints, naming class, method, parameter, hints and fix."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typing_extensions import override

from kvcontract import BlockIdsSpec, LoadStoreSpec, OffloadKey, ReqContext
from kvcontract.contracts.enforcement.signatures import check_override_signatures
from kvcontract.enforce import ContractHintWarning, ContractViolation, configure
from kvcontract.lint.runner import LintSettings, lint_files
from kvcontract.policies import LRUPolicy
from tests.contracts.support import RecordingManager, logged

ROOT = Path(__file__).resolve().parents[2]
FAIL_CASES = ROOT / "typecheck" / "fail" / "narrowed_overrides.py"


def define_narrow_lru() -> type:
    class NarrowLRU(LRUPolicy):
        @override
        def touch(self, keys: list[OffloadKey]) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]  # the case under test
            keys.sort()

    return NarrowLRU


def test_a_list_where_the_contract_says_sequence_is_refused_with_everything_named() -> None:
    with pytest.raises(ContractViolation) as raised:
        define_narrow_lru()
    message = str(raised.value)
    assert message.startswith(f"{__name__}.")
    assert "NarrowLRU.touch parameter 'keys' is list[OffloadKey] where CachePolicy.touch says Sequence[OffloadKey]" in (
        message
    )
    assert "Fix: annotate it Sequence[OffloadKey] (or wider)" in message
    assert "len(), indexing and repeated passes" in message
    assert isinstance(raised.value, TypeError)


def define_narrow() -> type:
    class Narrow(RecordingManager):
        @override
        def prepare_store(self, keys: list[OffloadKey], req_context: ReqContext) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]  # the case under test
            return None

        @override
        def prepare_load(self, keys: tuple[OffloadKey, ...], req_context: ReqContext) -> BlockIdsSpec:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]  # the case under test
            return BlockIdsSpec(())

        @override
        def complete_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]  # the case under test
            return None

    return Narrow


def test_every_narrowed_parameter_of_a_manager_is_named_in_one_error() -> None:
    with pytest.raises(ContractViolation) as raised:
        define_narrow()
    message = str(raised.value)
    assert "Narrow.prepare_store parameter 'keys' is list[OffloadKey]" in message
    assert "Narrow.prepare_load parameter 'keys' is tuple[OffloadKey, ...]" in message
    assert (
        "Narrow.complete_load parameter 'keys' is Sequence[OffloadKey] where OffloadingManager.complete_load says "
        "Iterable[OffloadKey]. Fix: annotate it Iterable[OffloadKey] (or wider) and use only what an Iterable "
        "gives: one pass"
    ) in message


def define_wide() -> type:
    class Wide(RecordingManager):
        @override
        def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> BlockIdsSpec | None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]  # the case under test
            return None

    return Wide


def test_a_widened_return_is_refused() -> None:
    with pytest.raises(
        ContractViolation,
        match=r"Wide.prepare_load returns BlockIdsSpec \| None where OffloadingManager.prepare_load says LoadStoreSpec",
    ):
        define_wide()


def test_wider_parameters_narrower_returns_and_missing_hints_pass() -> None:
    class Wider(RecordingManager):
        @override
        def touch(self, keys: Iterable[OffloadKey], req_context: object) -> None:
            return None

        @override
        def complete_load(self, keys: object, req_context: ReqContext) -> None:
            return None

        @override
        def prepare_load(self, keys: Sequence[bytes], req_context: ReqContext) -> BlockIdsSpec:
            return BlockIdsSpec(())

        @override
        def complete_store(self, keys, req_context, success=True):  # type: ignore[no-untyped-def]  # pyright: ignore[reportMissingParameterType]  # noqa: KVC006  # the case under test
            return None

    assert Wider().prepare_load((), ReqContext("r")) == BlockIdsSpec(())


def define_narrow_off() -> type:
    class NarrowOff(RecordingManager):
        @override
        def touch(self, keys: list[OffloadKey], req_context: ReqContext) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]  # the case under test
            return None

    return NarrowOff


def test_the_rule_holds_with_call_checks_off() -> None:
    configure(checks=False)
    try:
        with pytest.raises(ContractViolation, match="NarrowOff.touch parameter 'keys'"):
            define_narrow_off()
    finally:
        configure(checks=True)


def define_kinds() -> type:
    class Kinds(RecordingManager):
        @staticmethod
        @override
        def touch(keys: list[OffloadKey], req_context: ReqContext) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]  # the case under test
            return None

        @logged
        @override
        def complete_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]  # the case under test
            return None

    return Kinds


def test_static_and_decorated_overrides_are_read_through() -> None:
    with pytest.raises(ContractViolation) as raised:
        define_kinds()
    assert "Kinds.touch parameter 'keys' is list[OffloadKey]" in str(raised.value)
    assert "Kinds.complete_load parameter 'keys' is Sequence[OffloadKey]" in str(raised.value)


class ListTouchMixin:
    """A plain mixin whose contract method narrows: refused where the mixin meets the contract."""

    @override
    def touch(self, keys: list[OffloadKey], req_context: ReqContext) -> None:  # type: ignore[misc]  # pyright: ignore[reportGeneralTypeIssues]  # noqa: KVC002  # no base of the mixin defines touch
        return None


def test_a_mixins_narrowed_method_is_refused_at_the_combining_class() -> None:
    with pytest.raises(ContractViolation, match=r"\.Mixed narrows its contract.*Mixed.touch parameter 'keys'"):
        type("Mixed", (ListTouchMixin, RecordingManager), {})


def test_an_unresolvable_hint_is_one_warning_line_and_the_class_is_made() -> None:
    source = (
        "from __future__ import annotations\n"
        "from kvcontract import ReqContext\n"
        "from typing_extensions import override\n"
        "from tests.contracts.support import RecordingManager, logged\n"
        "class Unresolved(RecordingManager):\n"
        "    @override\n"
        "    def touch(self, keys: MissingName, req_context: ReqContext) -> None:\n"
        "        return None\n"
    )
    namespace: dict[str, object] = {"__name__": "downstream"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(source, "downstream.py", "exec", dont_inherit=True), namespace)
    assert isinstance(namespace["Unresolved"], type)
    [warning] = [w for w in caught if w.category is ContractHintWarning]
    text = str(warning.message)
    assert "\n" not in text
    assert text.startswith("downstream.Unresolved.touch: cannot resolve the hint `MissingName` of parameter 'keys'")
    assert "NameError" in text and "unchecked" in text
    assert (warning.filename, warning.lineno) == (
        "downstream.py",
        6,
    )  # where the method is written (its first decorator)


class KeyBatch(Protocol):
    """A protocol of the author's own, not runtime-checkable: beartype cannot compare a hint with it."""

    def __len__(self) -> int: ...


def test_a_hint_beartype_cannot_compare_is_one_warning_line_and_the_class_is_made() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        class Batched(RecordingManager):
            @override
            def touch(self, keys: KeyBatch, req_context: ReqContext) -> None:  # wider: the type checkers accept it
                return None

    assert Batched.__name__ == "Batched"
    [warning] = [w for w in caught if w.category is ContractHintWarning]
    assert (
        "Batched.touch: cannot compare the hint KeyBatch of parameter 'keys' with the contract's Sequence[OffloadKey]"
        in str(warning.message)
    )


# The reference model: the container forms a caller may pass, ordered by what they promise.
_ORIGINS: dict[str, set[str]] = {
    "list": {"list", "Sequence", "Collection", "Iterable", "object"},
    "tuple": {"tuple", "Sequence", "Collection", "Iterable", "object"},
    "Sequence": {"Sequence", "Collection", "Iterable", "object"},
    "Collection": {"Collection", "Iterable", "object"},
    "Iterable": {"Iterable", "object"},
}
_ELEMENTS: dict[str, set[str]] = {"OffloadKey": {"OffloadKey", "bytes", "object"}, "bytes": {"bytes", "object"}}
_FORMS: dict[str, Callable[[object], object]] = {
    "list": lambda item: list[item],  # type: ignore[valid-type]  # built from a drawn element type
    "tuple": lambda item: tuple[item, ...],  # type: ignore[valid-type]  # built from a drawn element type
    "Sequence": lambda item: Sequence[item],  # type: ignore[valid-type]  # built from a drawn element type
    "Collection": lambda item: Collection[item],  # type: ignore[valid-type]  # built from a drawn element type
    "Iterable": lambda item: Iterable[item],  # type: ignore[valid-type]  # built from a drawn element type
}
_ITEMS: dict[str, object] = {"OffloadKey": OffloadKey, "bytes": bytes, "object": object}


@given(
    contract=st.sampled_from([("touch", "Sequence"), ("complete_load", "Iterable")]),
    origin=st.sampled_from([*_FORMS, "object"]),
    element=st.sampled_from(sorted(_ITEMS)),
)
def test_an_override_is_refused_exactly_when_it_accepts_less_than_its_contract(
    contract: tuple[str, str], origin: str, element: str
) -> None:
    method, contract_origin = contract
    hint = object if origin == "object" else _FORMS[origin](_ITEMS[element])
    accepts_all = origin in _ORIGINS[contract_origin] and (origin == "object" or element in _ELEMENTS["OffloadKey"])

    def body(self: object, keys: object, req_context: ReqContext) -> None:
        return None

    body.__annotations__ = {"keys": hint, "req_context": ReqContext, "return": None}
    override(body)
    try:
        type("Drawn", (RecordingManager,), {method: body})
    except ContractViolation as error:
        assert not accepts_all, str(error)
        assert f"Drawn.{method} parameter 'keys'" in str(error)
    else:
        assert accepts_all, f"{method}(keys: {hint}) was accepted where the contract says {contract_origin}"


def _class_definitions() -> Iterator[tuple[str, int, str]]:
    """Each class of the fail cases: its name, line and source."""
    source = FAIL_CASES.read_text(encoding="utf-8")
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            yield node.name, node.lineno, ast.get_source_segment(source, node) or ""


def test_class_creation_and_the_lint_refuse_the_type_checkers_fail_cases() -> None:
    """typecheck/fail/narrowed_overrides.py pins mypy's and pyright's verdict; the two other guards agree."""
    header = FAIL_CASES.read_text(encoding="utf-8").split("\n\nclass ", 1)[0]
    settings = LintSettings(select=("KVC003",), jobs=1, project_root=str(ROOT))
    flagged = {finding.line for finding in lint_files([str(FAIL_CASES)], settings).findings}
    for name, line, source in _class_definitions():
        namespace: dict[str, object] = {"__name__": "typecheck.fail.narrowed_overrides"}
        exec(compile(header, str(FAIL_CASES), "exec"), namespace)
        expected_narrow = name != "WiderIsFine"
        try:
            exec(compile("\n" * (line - 1) + source, str(FAIL_CASES), "exec"), namespace)
        except ContractViolation as error:
            assert expected_narrow, f"{name}: {error}"
            assert f"{name}." in str(error)
        else:
            assert not expected_narrow, f"{name} was created"
        end = line + source.count("\n")
        assert any(line <= found <= end for found in flagged) is expected_narrow, name


def test_an_engine_base_can_be_checked_too() -> None:
    class EngineBase:
        def submit(self, keys: Sequence[OffloadKey]) -> LoadStoreSpec:
            return LoadStoreSpec()

    class Adapter(EngineBase):
        @override
        def submit(self, keys: list[OffloadKey]) -> BlockIdsSpec:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]  # the case under test
            return BlockIdsSpec(())

    with pytest.raises(ContractViolation, match="Adapter.submit parameter 'keys' is list"):
        check_override_signatures(Adapter, {"submit": EngineBase.submit})
