"""The ``@override`` rule: every method that overrides a base carries the marker, checked at class creation."""

from __future__ import annotations

from kvcontract.contracts.enforcement.errors import ContractDefinitionError
from kvcontract.contracts.enforcement.members import (
    FROM_MIXIN_ATTRIBUTE,
    MACHINERY_MODULES,
    contract_methods,
    from_mixin,
    is_method_like,
)

__all__ = ["check_mixin_override_markers", "check_override_markers"]

_EXEMPT_FROM_OVERRIDE = frozenset({"__init__", "__new__", "__init_subclass__", "__post_init__"})
"""Methods that override without the marker, as pyright exempts them."""

_WRAPPER_ATTRIBUTES = ("__func__", "fget", "fset", "fdel", "func", "__wrapped__")


def check_override_markers(cls: type) -> None:
    """Raise :class:`ContractDefinitionError` naming each method of ``cls`` that overrides without ``@override``."""
    problems: list[str] = []
    for name, member in cls.__dict__.items():
        if (
            name in _EXEMPT_FROM_OVERRIDE
            or _is_mangled(name)
            or not is_method_like(member)
            or getattr(member, "__module__", None) in MACHINERY_MODULES
            or getattr(member, FROM_MIXIN_ATTRIBUTE, False)
            or _is_synthesized(member)
        ):
            continue
        base = next((b for b in cls.__mro__[1:] if name in b.__dict__), None)
        if base is not None and not _has_override_marker(member):
            problems.append(f"{name} (overrides {base.__module__}.{base.__qualname__}.{name})")
    _raise_for(cls, problems, "")


def check_mixin_override_markers(cls: type) -> None:
    """Contract methods that ``cls`` takes from a plain mixin need ``@override`` as its own do.

    A type checker sees only the mixin, which defines the method without a base, so neither
    pyright nor mypy can ask for the marker: the class that combines the two is where the
    override happens.
    """
    problems: list[str] = []
    for name in contract_methods(cls):
        if name in cls.__dict__ or name in _EXEMPT_FROM_OVERRIDE:
            continue
        provided = from_mixin(cls, name)
        if provided is None or _has_override_marker(provided[1]):
            continue
        mixin = provided[0]
        later = cls.__mro__[cls.__mro__.index(mixin) + 1 :]
        base = next(b for b in later if name in b.__dict__)
        problems.append(
            f"{name} (from mixin {mixin.__module__}.{mixin.__qualname__}, "
            f"overrides {base.__module__}.{base.__qualname__}.{name})"
        )
    _raise_for(
        cls,
        problems,
        " A mixin that implements a contract method should inherit the contract, so type "
        "checkers see the base its @override refers to.",
    )


def _raise_for(cls: type, problems: list[str], advice: str) -> None:
    if problems:
        raise ContractDefinitionError(
            f"{cls.__module__}.{cls.__qualname__} overrides without @override: "
            f"{'; '.join(problems)}. Decorate each with "
            f"@override (from typing_extensions import override).{advice}"
        )


def _is_synthesized(member: object) -> bool:
    """Made at run time, not written by the class's author: ``dataclass(slots=True)`` and attrs
    generate ``__repr__``, ``__eq__``... from source strings (as pyright, we do not ask them
    for ``@override``)."""
    function: object = getattr(member, "__func__", member)
    seen: set[int] = set()
    while (inner := getattr(function, "__wrapped__", None)) is not None and id(inner) not in seen:
        seen.add(id(inner))
        function = inner  # dataclass wraps its generated __repr__ with recursive_repr
    code = getattr(function, "__code__", None)
    return code is not None and str(getattr(code, "co_filename", "")).startswith("<")


def _is_mangled(name: str) -> bool:
    return name.startswith("__") and not name.endswith("__")


def _has_override_marker(member: object) -> bool:
    seen: set[int] = set()
    pending: list[object] = [member]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if getattr(current, "__override__", False) is True:
            return True
        pending.extend(
            inner for attribute in _WRAPPER_ATTRIBUTES if (inner := getattr(current, attribute, None)) is not None
        )
    return False
