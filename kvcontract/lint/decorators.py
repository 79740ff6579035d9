"""What a method's decorators make of it: override marker, overload, property parts, descriptors.

Decorators are resolved like any name, so ``from typing_extensions import override as ovr``
is recognised; a decorator that cannot be resolved is judged by its last name only.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from kvcontract.lint.resolve import ClassInfo, FunctionValue, Resolver, Unknown
from kvcontract.lint.summary import Decorator, DefSummary, ModuleSummary

__all__ = ["DecoratorKind", "EffectiveDef", "decorator_kinds", "effective_def"]


class DecoratorKind(Enum):
    """The decorators that matter to the rules and to ``--fix``."""

    OVERRIDE = "override"
    OVERLOAD = "overload"
    PROPERTY = "property"
    ACCESSOR = "accessor"
    DESCRIPTOR = "descriptor"
    OTHER = "other"


_BY_KEY = {
    "typing.override": DecoratorKind.OVERRIDE,
    "typing.overload": DecoratorKind.OVERLOAD,
    "builtins.property": DecoratorKind.PROPERTY,
    "abc.abstractproperty": DecoratorKind.PROPERTY,
    "enum.property": DecoratorKind.PROPERTY,
    "types.DynamicClassAttribute": DecoratorKind.PROPERTY,
    "builtins.classmethod": DecoratorKind.DESCRIPTOR,
    "builtins.staticmethod": DecoratorKind.DESCRIPTOR,
    "abc.abstractclassmethod": DecoratorKind.DESCRIPTOR,
    "abc.abstractstaticmethod": DecoratorKind.DESCRIPTOR,
    "functools.cached_property": DecoratorKind.DESCRIPTOR,
}
_BY_LAST_NAME = {
    "override": DecoratorKind.OVERRIDE,
    "overload": DecoratorKind.OVERLOAD,
    "property": DecoratorKind.PROPERTY,
    "classmethod": DecoratorKind.DESCRIPTOR,
    "staticmethod": DecoratorKind.DESCRIPTOR,
    "cached_property": DecoratorKind.DESCRIPTOR,
}
_ACCESSORS = frozenset({"setter", "getter", "deleter"})


def _kind(resolver: Resolver, summary: ModuleSummary, method: str, deco: Decorator) -> DecoratorKind:
    ref = deco.ref
    if ref is None:
        return DecoratorKind.OTHER
    if not deco.call and len(ref.attrs) >= 1 and ref.attrs[-1] in _ACCESSORS:
        return DecoratorKind.ACCESSOR
    value = resolver.resolve_ref(summary, ref)
    if isinstance(value, ClassInfo):
        kind = _BY_KEY.get(value.key)
    elif isinstance(value, FunctionValue):
        kind = _BY_KEY.get(value.qualname)
    else:
        kind = None
    if kind is None and isinstance(value, Unknown):
        kind = _BY_LAST_NAME.get(ref.attrs[-1] if ref.attrs else ref.root)
    if deco.call and kind is not DecoratorKind.OTHER and kind is not None:
        # ``@property()`` or ``@override()`` is not the decorator itself.
        return DecoratorKind.OTHER
    return kind or DecoratorKind.OTHER


def decorator_kinds(resolver: Resolver, summary: ModuleSummary, d: DefSummary) -> list[DecoratorKind]:
    """The kind of each decorator of ``d``, top to bottom."""
    return [_kind(resolver, summary, d.name, deco) for deco in d.decorators]


class EffectiveDef:
    """The definition that stands for a method name in a class body, as type checkers see it.

    For a property it is the getter; for overloads the implementation; otherwise the last def.
    """

    __slots__ = ("definition", "has_override", "kinds")

    def __init__(self, definition: DefSummary, kinds: list[DecoratorKind]) -> None:
        self.definition: DefSummary = definition
        self.kinds: list[DecoratorKind] = kinds
        self.has_override: bool = DecoratorKind.OVERRIDE in kinds


def effective_def(resolver: Resolver, summary: ModuleSummary, defs: Sequence[DefSummary]) -> EffectiveDef | None:
    """The effective definition among the ``defs`` of one name (source order); ``None`` when there
    are only overload signatures, which need no decorator."""
    last = defs[-1]
    if not any(d.decorators for d in defs):
        return EffectiveDef(last, [])
    kinds = decorator_kinds(resolver, summary, last)
    if DecoratorKind.ACCESSOR in kinds:
        for earlier in reversed(defs[:-1]):
            earlier_kinds = decorator_kinds(resolver, summary, earlier)
            if DecoratorKind.PROPERTY in earlier_kinds:
                return EffectiveDef(earlier, earlier_kinds)
        return EffectiveDef(last, kinds)
    if DecoratorKind.OVERLOAD in kinds:
        return None
    return EffectiveDef(last, kinds)
