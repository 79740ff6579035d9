"""The contracts' root hands each implementer to the runtime enforcement itself: no import registers it.

``contracts/base.py`` imports the enforcement and calls it from ``Contract.__init_subclass__``;
the enforcement names the root rather than importing it, so the two form no circle
(tests/test_layering.py). Before, importing ``kvcontract.contracts`` registered the enforcer
with the base as a side effect.
"""

from __future__ import annotations

from typing import Protocol

import pytest
from typing_extensions import override

import kvcontract.contracts.base as base
from kvcontract import (
    ContractViolation,
    LookupResult,
    OffloadingManager,
    OffloadKey,
    ReqContext,
)
from kvcontract.contracts.enforcement.members import is_contract
from tests.contracts.support import RecordingManager


def define_implementer() -> type:
    """A plain implementer of a contract."""

    class Implementer(OffloadingManager):
        @override
        def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
            return LookupResult.MISS

    return Implementer


def test_the_root_calls_the_enforcement_for_each_implementer(monkeypatch: pytest.MonkeyPatch) -> None:
    enforced: list[type] = []
    monkeypatch.setattr(base, "enforce_class", enforced.append)
    implementer = define_implementer()
    assert enforced == [implementer]


def test_a_protocol_extending_a_contract_is_a_contract_and_not_enforced(monkeypatch: pytest.MonkeyPatch) -> None:
    enforced: list[type] = []
    monkeypatch.setattr(base, "enforce_class", enforced.append)

    class Extended(OffloadingManager, Protocol):
        def extra(self) -> int: ...

    assert enforced == []
    assert is_contract(Extended)
    assert not is_contract(base.Contract)


def test_errors_name_the_public_module(keys: list[OffloadKey]) -> None:
    """Tracebacks say ``kvcontract.enforce.ContractViolation``, an import a user can write."""
    with pytest.raises(ContractViolation) as raised:
        RecordingManager().lookup(keys[0], "request-0")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    assert f"{type(raised.value).__module__}.{type(raised.value).__name__}" == "kvcontract.enforce.ContractViolation"
