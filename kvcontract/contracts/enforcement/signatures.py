"""The override rule for hints: each override of a contract method accepts at least what the contract accepts.

A caller holds the contract, not the implementation: where ``CachePolicy.touch`` says
``Sequence[OffloadKey]`` it may pass a tuple, so an override that annotates ``list`` (and calls
``keys.sort()``) breaks on the first tuple. So each parameter hint of an override must be at
least as wide as the contract's (the contract's hint a subhint of the override's) and its
return hint at most as wide; ``beartype.door.is_subhint`` decides both. Parameters are matched
by position, as the call checks bind them. An unannotated parameter or return passes (the
lint's KVC006 and the kit cover it); a hint that cannot be resolved or compared is named in
one :class:`ContractHintWarning` line instead of a guess.

Verdicts are cached per pair of hints, so ``is_subhint`` (tens to hundreds of microseconds)
runs once per distinct pair in a process, and an override that repeats its contract's hints,
the common case, costs an equality test (``python tools/bench_class_creation.py``).
"""

from __future__ import annotations

import inspect
import types
import warnings
from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from typing import cast

from beartype.door import is_subhint as _beartype_is_subhint

from kvcontract.contracts.enforcement.errors import ContractHintWarning, ContractViolation, short_type_name
from kvcontract.contracts.enforcement.members import contract_methods, from_mixin

__all__ = ["check_override_signatures"]

_subhint: Callable[[object, object], bool] = cast(Callable[[object, object], bool], _beartype_is_subhint)
"""beartype's ``is_subhint`` for hints read at run time, which no checker can see as type forms."""

_MISSING = object()
"""A parameter or return without annotation: nothing to compare."""


def check_override_signatures(cls: type, methods: Mapping[str, Callable[..., object]] | None = None) -> None:
    """Raise one :class:`ContractViolation` naming every override of ``cls`` that narrows its contract.

    The overrides checked are those written in ``cls``'s body and the contract methods it
    takes from a plain mixin; inherited ones were checked with the class that wrote them.
    ``methods`` holds the methods to check against, by name: the contract methods of ``cls``
    unless given (an engine's base class, for the adapters that subclass one).
    """
    problems: list[str] = []
    for name, contract_fn in (contract_methods(cls) if methods is None else methods).items():
        if name in cls.__dict__:
            member: object = cls.__dict__[name]
        elif methods is None and (provided := from_mixin(cls, name)) is not None:
            member = provided[1]
        else:
            continue
        function = _function_of(member)
        if function is not None:  # else a callable object or a descriptor of its own: nothing annotated
            problems.extend(_Override(cls, name, function, type(member) is staticmethod).narrowings(contract_fn))
    if problems:
        raise ContractViolation(
            f"{cls.__module__}.{cls.__qualname__} narrows its contract, so a caller may pass what it "
            f"cannot take: {'; '.join(problems)}."
        )


class _Override:
    """One override as written: its class, name, function and whether it is static (takes no self)."""

    def __init__(self, cls: type, name: str, function: types.FunctionType, static: bool) -> None:
        self.cls, self.name, self.function, self.static = cls, name, function, static

    def narrowings(self, contract_fn: Callable[..., object]) -> list[str]:
        """What this override narrows of ``contract_fn``, one clause per parameter or return."""
        try:
            own = list(inspect.signature(self.function).parameters.values())
            contract_params = _contract_parameters(contract_fn)
        except (TypeError, ValueError):
            return []  # a builtin or a C function: no signature to compare
        hints = self._hints(self.function, "the")
        contract_hints = self._hints(contract_fn, f"{contract_fn.__qualname__}'s", cached=True)
        where = f"{self.cls.__qualname__}.{self.name}"
        problems: list[str] = []
        for index, wanted in enumerate(contract_params[1:], start=0 if self.static else 1):
            expected = contract_hints.get(wanted.name, _MISSING)
            found = _receiving(own, index, wanted.name)
            hint = _MISSING if found is None else hints.get(found.name, _MISSING)
            if found is None or expected is _MISSING or hint is _MISSING:
                continue
            if not self._keeps(f"parameter {found.name!r}", hint, expected, parameter=True):
                problems.append(
                    f"{where} parameter {found.name!r} is {short_type_name(hint)} where {contract_fn.__qualname__} "
                    f"says {short_type_name(expected)}. Fix: annotate it {short_type_name(expected)} (or wider) "
                    f"and use only what {_what_it_gives(expected)}"
                )
        returned, expected = hints.get("return", _MISSING), contract_hints.get("return", _MISSING)
        if (
            returned is not _MISSING
            and expected is not _MISSING
            and not self._keeps("the return", returned, expected, parameter=False)
        ):
            problems.append(
                f"{where} returns {short_type_name(returned)} where {contract_fn.__qualname__} says "
                f"{short_type_name(expected)}. Fix: return within {short_type_name(expected)}"
            )
        return problems

    def _hints(self, function: Callable[..., object], whose: str, *, cached: bool = False) -> dict[str, object]:
        """``function``'s resolved hints; each one that cannot be resolved is warned about and left out."""
        resolved, failures = (_contract_hints if cached else _resolved_hints)(function)
        for param, annotation, error in failures:
            what = "the return" if param == "return" else f"parameter {param!r}"
            written = annotation if isinstance(annotation, str) else repr(annotation)
            self._warn(f"cannot resolve {whose} hint `{written}` of {what} ({error})")
        return resolved

    def _keeps(self, what: str, own: object, contract: object, *, parameter: bool) -> bool:
        """Whether the hint ``own`` keeps ``contract``'s: wider for a parameter, narrower for the return.

        A pair beartype cannot compare passes, with a warning.
        """
        try:
            return _is_subhint(contract, own) if parameter else _is_subhint(own, contract)
        except Exception as error:  # beartype refuses some hints; any refusal is reported alike
            self._warn(
                f"cannot compare the hint {short_type_name(own)} of {what} with the contract's "
                f"{short_type_name(contract)} ({type(error).__name__}: {error})"
            )
            return True

    def _warn(self, problem: str) -> None:
        """One line, pointing at the method, saying what class creation could not check."""
        code = self.function.__code__
        warnings.warn_explicit(
            f"{self.cls.__module__}.{self.cls.__qualname__}.{self.name}: {problem}; class creation leaves it "
            "unchecked (kvcontract-lint and the type checkers still see it)",
            ContractHintWarning,
            code.co_filename,
            code.co_firstlineno,
            module=self.cls.__module__,
        )


def _function_of(member: object) -> types.FunctionType | None:
    """The function a class attribute runs, through staticmethod, classmethod and ``functools.wraps``."""
    function: object = getattr(member, "__func__", member)
    if callable(function):
        function = inspect.unwrap(function)
    return function if isinstance(function, types.FunctionType) else None


def _receiving(own: list[inspect.Parameter], index: int, name: str) -> inspect.Parameter | None:
    """The override's parameter that receives the contract's ``index``-th argument (or the keyword ``name``)."""
    positional = [p for p in own if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if index < len(positional):
        return positional[index]
    kinds = {p.kind: p for p in own}
    named = next((p for p in own if p.name == name and p.kind is p.KEYWORD_ONLY), None)
    return named or kinds.get(inspect.Parameter.VAR_POSITIONAL) or kinds.get(inspect.Parameter.VAR_KEYWORD)


def _resolved_hints(function: Callable[..., object]) -> tuple[dict[str, object], tuple[tuple[str, object, str], ...]]:
    """``function``'s hints, resolved in its module, and ``(parameter, annotation, error)`` for each that is not.

    Each string is evaluated in the function's globals, as ``typing.get_type_hints`` does, from
    code compiled once per distinct string: ``get_type_hints`` compiles every string anew, which
    was half the rule's cost per class.
    """
    namespace: dict[str, object] = getattr(function, "__globals__", {})
    resolved: dict[str, object] = {}
    failures: list[tuple[str, object, str]] = []
    for param, annotation in getattr(function, "__annotations__", {}).items():
        try:
            value = (
                eval(_compiled(annotation), namespace) if isinstance(annotation, str) else annotation
            )  # an annotation the module wrote, evaluated as get_type_hints would
        except Exception as error:  # any failure to evaluate a hint is reported alike
            failures.append((param, annotation, f"{type(error).__name__}: {error}"))
            continue
        resolved[param] = type(None) if value is None else value
    return resolved, tuple(failures)


@lru_cache(maxsize=4096)
def _compiled(annotation: str) -> types.CodeType:
    """An annotation's code, compiled once per distinct string."""
    return compile(annotation, "<annotation>", "eval")


@cache
def _contract_parameters(contract_fn: Callable[..., object]) -> list[inspect.Parameter]:
    """A contract method's parameters, read once per process."""
    return list(inspect.signature(contract_fn).parameters.values())


_contract_hints = cache(_resolved_hints)
"""A contract method's hints, read once per process however many classes override it (overrides are
read each time, so a class made at run time is not kept alive by the cache)."""


def _is_subhint(narrower: object, wider: object) -> bool:
    """``is_subhint``, answered once per pair of hashable hints; equal hints need no answer."""
    if narrower == wider:
        return True
    try:
        return _cached_is_subhint(narrower, wider)
    except TypeError as error:
        if "unhashable" not in str(error):
            raise
        return _subhint(narrower, wider)


@lru_cache(maxsize=4096)
def _cached_is_subhint(narrower: object, wider: object) -> bool:
    return _subhint(narrower, wider)


def _what_it_gives(hint: object) -> str:
    """What a container hint promises the method that receives it, in the contract's words."""
    text = short_type_name(hint)
    return next((gives for prefix, gives in _PROMISES if text.startswith(prefix)), f"{text} promises")


_PROMISES = (
    ("Sequence[", "a Sequence gives: len(), indexing and repeated passes (list(...) copies it to sort or change)"),
    ("Iterable[", "an Iterable gives: one pass (list(...) materializes it for more)"),
    ("Collection[", "a Collection gives: len(), `in` and repeated passes, no indexing"),
    ("Set[", "a Set gives: `in`, len() and passes, no changes"),
)
