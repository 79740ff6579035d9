"""Which classes are contracts, which methods they define, and where a class takes one from."""

from __future__ import annotations

import types
from collections.abc import Callable

__all__ = [
    "CONTRACT_ROOT",
    "FROM_MIXIN_ATTRIBUTE",
    "MACHINERY_MODULES",
    "contract_methods",
    "from_mixin",
    "inherits_root",
    "is_contract",
    "is_method_like",
]

MACHINERY_MODULES = frozenset({"typing", "typing_extensions", "abc"})
"""Modules whose functions are planted on classes by the runtime (``__subclasshook__``...)."""

CONTRACT_ROOT = ("kvcontract.contracts.base", "Contract")
"""The root every contract inherits, by module and name: ``contracts/base.py`` calls the enforcement
when a class is created, so the enforcement names the root rather than importing it (no circle)."""

FROM_MIXIN_ATTRIBUTE = "__kvcontract_from_mixin__"
"""Marks a wrapper that enforcement put on a class for a contract method a plain mixin provides."""


def inherits_root(cls: type) -> bool:
    """Whether ``cls`` is the contracts' root or inherits it."""
    return any((base.__module__, base.__qualname__) == CONTRACT_ROOT for base in getattr(cls, "__mro__", ()))


def is_contract(cls: type) -> bool:
    """Whether ``cls`` is a contract: a Protocol below the root (not the root itself)."""
    return (
        bool(cls.__dict__.get("_is_protocol", False))
        and (cls.__module__, cls.__qualname__) != CONTRACT_ROOT
        and inherits_root(cls)
    )


def contract_methods(cls: type) -> dict[str, Callable[..., object]]:
    """Contract methods visible from ``cls``, each from the most derived contract defining it."""
    methods: dict[str, Callable[..., object]] = {}
    for base in cls.__mro__:
        if not is_contract(base):
            continue
        for name, member in base.__dict__.items():
            if (
                isinstance(member, types.FunctionType)
                and member.__qualname__ == f"{base.__qualname__}.{name}"
                and _is_public_method(name)
            ):
                methods.setdefault(name, member)
    return methods


def _is_public_method(name: str) -> bool:
    return not name.startswith("_") or (name.endswith("__") and name != "__init_subclass__")


def from_mixin(cls: type, name: str) -> tuple[type, object] | None:
    """The plain mixin (outside the contract hierarchy) that gives ``cls`` its ``name``, if one does.

    Wrappers that enforcement itself put on classes are looked through, so the answer does
    not depend on whether checks are on.
    """
    for base in cls.__mro__[1:]:
        member = base.__dict__.get(name)
        if member is None or getattr(member, FROM_MIXIN_ATTRIBUTE, False):
            continue
        if inherits_root(base) or base.__module__ in MACHINERY_MODULES | {"builtins"}:
            return None  # a contract (checked itself), or Python's own classes
        return (base, member) if is_method_like(member) else None
    return None


def is_method_like(member: object) -> bool:
    """Whether a class attribute is a method (a function, a descriptor of one, a property)."""
    if isinstance(member, type):
        return False
    return (
        callable(member)
        or isinstance(member, (classmethod, staticmethod, property))
        or (hasattr(member, "__get__") and hasattr(member, "func"))
    )
