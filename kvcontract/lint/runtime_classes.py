"""Classes that have no Python source (``object``, ``dict``, ``Exception``, stdlib C modules).

They are described by introspecting the standard library at run time, which imports no
checked code. Members are aligned with what type checkers see in typeshed: a C type's
dictionary holds the four ordering comparisons whenever it compares at all, but typeshed
declares them only on the types that are really ordered, so they are dropped elsewhere.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import sys
from typing import NamedTuple

__all__ = ["RuntimeClass", "RuntimeModule", "describe", "is_stdlib_module", "runtime_attribute", "runtime_module"]

_ORDERING = frozenset({"__lt__", "__le__", "__gt__", "__ge__"})
_ORDERED_BUILTINS: tuple[type, ...] = (int, float, str, bytes, bytearray, list, tuple, set, frozenset)
# typeshed declares these on ``object`` although they are not in its runtime dictionary.
_OBJECT_EXTRA = frozenset({"__dict__", "__module__", "__annotations__"})


class RuntimeClass(NamedTuple):
    """A class described from run time: its own member names and the classes after it in its MRO."""

    module: str
    qualname: str
    names: frozenset[str]
    mro: tuple[RuntimeClass, ...]


class RuntimeModule(NamedTuple):
    """A module without source: its classes, and the qualified names of its other members."""

    name: str
    classes: dict[str, RuntimeClass]
    others: dict[str, str]


def is_stdlib_module(name: str) -> bool:
    """Whether ``name`` belongs to the standard library (safe to import for introspection)."""
    return name.partition(".")[0] in sys.stdlib_module_names


def _names_of(cls: type) -> frozenset[str]:
    names = set(vars(cls))
    if cls is object:
        names -= _ORDERING
        names |= _OBJECT_EXTRA
    elif not issubclass(cls, _ORDERED_BUILTINS) and (cls.__module__ == "builtins" or issubclass(cls, dict)):
        names -= _ORDERING
    return frozenset(names)


@functools.cache
def describe(cls: type) -> RuntimeClass:
    """Describe one class from run time."""
    mro = tuple(describe(c) for c in cls.__mro__[1:])
    return RuntimeClass(cls.__module__, cls.__qualname__, _names_of(cls), mro)


_NO_IMPORT = frozenset({"antigravity", "this", "idlelib", "turtledemo"})


def runtime_attribute(module: str, name: str) -> RuntimeClass | None:
    """``module.name`` of the standard library when it is a class at run time, else ``None``."""
    if not is_stdlib_module(module) or module.partition(".")[0] in _NO_IMPORT:
        return None
    try:
        value = getattr(importlib.import_module(module), name, None)
    except Exception:  # importing a stdlib module can fail in many ways (missing C parts...)
        return None
    return describe(value) if isinstance(value, type) else None


@functools.cache
def runtime_module(name: str) -> RuntimeModule | None:
    """Describe a standard-library module without source; ``None`` if it is not one."""
    if not is_stdlib_module(name):
        return None
    try:
        module = builtins if name == "builtins" else importlib.import_module(name)
    except ImportError:
        return None
    classes: dict[str, RuntimeClass] = {}
    others: dict[str, str] = {}
    for attr, value in vars(module).items():
        if isinstance(value, type):
            classes[attr] = describe(value)
        else:
            owner = getattr(value, "__module__", None)
            qual = getattr(value, "__qualname__", None)
            others[attr] = f"{owner}.{qual}" if isinstance(owner, str) and isinstance(qual, str) else f"{name}.{attr}"
    return RuntimeModule(name, classes, others)
