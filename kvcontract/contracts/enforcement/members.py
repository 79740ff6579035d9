"""Which classes are contracts, which methods they define, and where a class takes one from."""

from __future__ import annotations

import types
from collections.abc import Callable

from kvcontract.contracts.base import Contract

__all__ = [
    "FROM_MIXIN_ATTRIBUTE",
    "MACHINERY_MODULES",
    "contract_methods",
    "from_mixin",
    "is_contract",
    "is_method_like",
]

MACHINERY_MODULES = frozenset({"typing", "typing_extensions", "abc"})
"""Modules whose functions are planted on classes by the runtime (``__subclasshook__``...)."""

FROM_MIXIN_ATTRIBUTE = "__kvcontract_from_mixin__"
"""Marks a wrapper that enforcement put on a class for a contract method a plain mixin provides."""


def is_contract(cls: type) -> bool:
    """Whether ``cls`` is a contract: a Protocol below :class:`Contract` (not the root itself)."""
    return (
        cls is not Contract
        and Contract in getattr(cls, "__mro__", ())
        and bool(cls.__dict__.get("_is_protocol", False))
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
        if Contract in base.__mro__ or base.__module__ in MACHINERY_MODULES | {"builtins"}:
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
