"""Names of ``typing`` and ``typing_extensions`` that type checkers treat specially.

Their runtime definitions (a ``Generic`` with ``__class_getitem__``, a ``NamedTuple``
function, an ``Any`` class) differ from what type checkers see, so they resolve here
first: special classes with the members typeshed gives them, aliases such as ``List``
to the class they stand for, and markers (not classes) such as ``override`` or ``Any``.
"""

from __future__ import annotations

import typing
from typing import Literal, NamedTuple

__all__ = ["TYPING_MODULES", "SpecialClass", "TypingForm", "typing_form"]

TYPING_MODULES = frozenset({"typing", "typing_extensions"})

Base = Literal["object", "tuple", "dict"]


class SpecialClass(NamedTuple):
    """A class synthesized by type checkers: its key, own members and runtime base."""

    key: str
    names: frozenset[str]
    base: Base


class TypingForm(NamedTuple):
    """What a typing name is: a special class, an alias of a class, or a marker (not a class)."""

    special: SpecialClass | None = None
    alias: tuple[str, str] | None = None
    marker: str | None = None


NAMED_TUPLE = SpecialClass(
    "typing.NamedTuple",
    frozenset({"_make", "_asdict", "_replace", "_fields", "_field_defaults", "__orig_bases__", "__init__", "__new__"}),
    "tuple",
)
_SPECIAL = {
    "Generic": SpecialClass("typing.Generic", frozenset(), "object"),
    "Protocol": SpecialClass("typing.Protocol", frozenset(), "object"),
    "NamedTuple": NAMED_TUPLE,
    "TypedDict": SpecialClass(
        "typing.TypedDict",
        frozenset(
            {
                "copy",
                "setdefault",
                "pop",
                "update",
                "__delitem__",
                "items",
                "keys",
                "values",
                "__or__",
                "__ror__",
                "__ior__",
            }
        ),
        "dict",
    ),
}
_MARKERS = frozenset(
    {
        "override",
        "overload",
        "final",
        "no_type_check",
        "runtime_checkable",
        "deprecated",
        "Any",
        "Union",
        "Optional",
        "NewType",
        "Literal",
        "ClassVar",
        "Final",
        "Annotated",
    }
)


def _aliases() -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {"Text": ("builtins", "str")}
    for name in dir(typing):
        origin = getattr(getattr(typing, name), "__origin__", None)
        if isinstance(origin, type):
            out[name] = (origin.__module__, origin.__qualname__)
    return out


_ALIASES = _aliases()


def typing_form(name: str) -> TypingForm | None:
    """The special meaning of ``typing.<name>`` (same for ``typing_extensions``), if it has one."""
    special = _SPECIAL.get(name)
    if special is not None:
        return TypingForm(special=special)
    if name in _MARKERS:
        return TypingForm(marker="typing." + name)
    alias = _ALIASES.get(name)
    if alias is not None:
        return TypingForm(alias=alias)
    return None
