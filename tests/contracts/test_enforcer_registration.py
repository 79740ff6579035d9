"""The contracts hand each implementer to the enforcer that ``kvcontract.contracts`` registers.

``contracts/base.py`` imports nothing of the enforcement (the two formed an import circle
before); a class that inherits a contract while no enforcer is registered is refused rather
than left unchecked.
"""

from __future__ import annotations

from typing import Protocol

import pytest
from typing_extensions import override

import kvcontract.contracts.base as base
from kvcontract import ContractViolation, LookupResult, OffloadingManager, OffloadKey, ReqContext
from kvcontract.contracts.enforcement.classes import enforce_class
from tests.contracts.conftest import RecordingManager


def test_importing_the_contracts_registers_the_enforcer() -> None:
    assert getattr(base, "_enforcer") is enforce_class


def define_implementer() -> type:
    """A plain implementer of a contract."""

    class Unchecked(OffloadingManager):
        @override
        def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
            return LookupResult.MISS

    return Unchecked


def test_an_implementer_without_an_enforcer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "_enforcer", None)
    with pytest.raises(RuntimeError, match=r"Unchecked inherits a kvcontract contract.*import kvcontract\.contracts"):
        define_implementer()


def test_a_protocol_extending_a_contract_needs_no_enforcer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "_enforcer", None)

    class Extended(OffloadingManager, Protocol):
        def extra(self) -> int: ...

    assert Extended.__dict__["_is_protocol"]


def test_errors_name_the_public_module(keys: list[OffloadKey]) -> None:
    """Tracebacks say ``kvcontract.enforce.ContractViolation``, an import a user can write."""
    with pytest.raises(ContractViolation) as raised:
        RecordingManager().lookup(keys[0], "request-0")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    assert f"{type(raised.value).__module__}.{type(raised.value).__name__}" == "kvcontract.enforce.ContractViolation"
