"""Pins what users see from each lint rule and each runtime check, on examples/broken_policy."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from kvcontract import ContractDefinitionError, ContractViolation

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "broken_policy"

LINT_FINDINGS = [
    (
        "KVC001",
        "lint_cases.py",
        50,
        "method 'touch' of class 'MissingOverride' overrides lint_cases.Base.touch without @override",
    ),
    (
        "KVC002",
        "lint_cases.py",
        56,
        "method 'prefetch' of class 'OverrideWithoutBase' is decorated with @override but no base class defines it",
    ),
    (
        "KVC003",
        "lint_cases.py",
        62,
        "parameter 'keys' is Sequence[OffloadKey] in contract method OffloadingManager.touch but narrowed to list[OffloadKey] here; accept at least Sequence[OffloadKey]",
    ),
    (
        "KVC004",
        "lint_cases.py",
        69,
        "list(keys) copies 'keys', which contract method OffloadingManager.prepare_store types as Sequence: it already supports len(), indexing and repeated iteration; use 'keys' directly",
    ),
    (
        "KVC005",
        "lint_cases.py",
        77,
        "parameter 'keys' is measured with len(), but contract method OffloadingManager.complete_store types it as Iterable, which may be a one-shot iterator; take one pass, or make one copy first (keys = list(keys))",
    ),
    (
        "KVC006",
        "lint_cases.py",
        84,
        "override of contract method OffloadingManager.lookup lacks annotations for parameter 'key', parameter 'req_context', the return type; copy them from the contract",
    ),
    (
        "KVC007",
        "lint_cases.py",
        88,
        "base 'MysteryBase' of class 'UnknownBase' cannot be resolved (module 'not_installed_anywhere' was not found); overrides of it are not checked",
    ),
    (
        "KVC001",
        "runtime_cases.py",
        24,
        "method 'touch' of class 'ForgetfulPolicy' overrides kvcontract.contracts.policy.CachePolicy.touch without @override",
    ),
    (
        "KVC003",
        "runtime_cases.py",
        35,
        "parameter 'keys' is Sequence[OffloadKey] in contract method CachePolicy.touch but narrowed to list[OffloadKey] here; accept at least Sequence[OffloadKey]",
    ),
    ("KVC000", "syntax_error.py", 3, "syntax error: invalid syntax"),
]


def test_each_lint_rule_reports_its_message() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kvcontract", "lint", ".", "--format", "json"],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    findings = [(f["code"], Path(f["path"]).name, f["line"], f["message"]) for f in json.loads(result.stdout)]
    assert findings == LINT_FINDINGS


def runtime_cases() -> ModuleType:
    """Import examples/broken_policy/runtime_cases.py by path."""
    spec = importlib.util.spec_from_file_location("broken_policy_runtime_cases", EXAMPLE / "runtime_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_missing_override_fails_at_class_creation() -> None:
    define: Callable[[], type] = runtime_cases().define_policy_without_override
    with pytest.raises(ContractDefinitionError) as raised:
        define()
    assert str(raised.value) == (
        "broken_policy_runtime_cases.define_policy_without_override.<locals>.ForgetfulPolicy "
        "overrides without @override: touch (overrides kvcontract.contracts.policy.CachePolicy.touch). "
        "Decorate each with @override (from typing_extensions import override)."
    )


def test_a_narrowed_override_fails_at_class_creation() -> None:
    define: Callable[[], type] = runtime_cases().define_policy_with_narrowed_touch
    with pytest.raises(ContractViolation) as raised:
        define()
    assert str(raised.value) == (
        "broken_policy_runtime_cases.define_policy_with_narrowed_touch.<locals>.SortingPolicy narrows its "
        "contract, so a caller may pass what it cannot take: "
        "define_policy_with_narrowed_touch.<locals>.SortingPolicy.touch parameter 'keys' is list[OffloadKey] "
        "where CachePolicy.touch says Sequence[OffloadKey]. Fix: annotate it Sequence[OffloadKey] (or wider) "
        "and use only what a Sequence gives: len(), indexing and repeated passes (list(...) copies it to sort "
        "or change)."
    )


SEQUENCE_FIX = (
    "Fix: pass a list or tuple (for example list(...) at the call site): the contract types it "
    "as a Sequence because implementations may take len(), index it or iterate it twice."
)
CALL_CASES = [
    (
        "generator_to_prepare_store",
        "OffloadingManager.prepare_store() called on CPUOffloadingManager.prepare_store: "
        f"parameter 'keys' expects Sequence[OffloadKey], received generator. {SEQUENCE_FIX}",
    ),
    (
        "set_to_touch",
        "OffloadingManager.touch() called on CPUOffloadingManager.touch: "
        f"parameter 'keys' expects Sequence[OffloadKey], received set. {SEQUENCE_FIX}",
    ),
    (
        "dict_view_to_prepare_load",
        "OffloadingManager.prepare_load() called on CPUOffloadingManager.prepare_load: "
        f"parameter 'keys' expects Sequence[OffloadKey], received dict_keys. {SEQUENCE_FIX}",
    ),
    (
        "bad_return_from_lookup",
        "OffloadingManager.lookup() implemented by LyingManager.lookup returned str, "
        "expected LookupResult. Fix: return what the contract declares.",
    ),
]


@pytest.mark.parametrize(("case", "message"), CALL_CASES)
def test_each_call_check_reports_its_message(case: str, message: str) -> None:
    trip: Callable[[], None] = getattr(runtime_cases(), case)
    with pytest.raises(ContractViolation) as raised:
        trip()
    assert str(raised.value) == message
