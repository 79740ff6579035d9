"""KVC001 missing-override, KVC002 override-without-base and KVC007 unresolved-base.

The base lookup follows pyright's ``reportImplicitOverride``: for each direct base in
order, the name is looked up along that base's MRO; a base that cannot be resolved is
skipped, and an unresolved class met in a base's MRO before the name stops the lookup
(the method may or may not override: KVC007 says so instead of a guess).
"""

from __future__ import annotations

from collections.abc import Iterator

from kvcontract.lint.decorators import DecoratorKind, EffectiveDef, effective_def
from kvcontract.lint.finding import AddOverride, Finding
from kvcontract.lint.resolve import ClassInfo, FunctionValue, Resolver, Unknown
from kvcontract.lint.summary import DefSummary, FromBinding, ModuleSummary
from kvcontract.lint.typeshed_extras import TYPE_INSTANCE_VARIABLES

__all__ = ["EXEMPT", "OverrideSettings", "override_findings", "override_name"]

EXEMPT = frozenset({"__init__", "__new__", "__init_subclass__", "__post_init__"})
"""Methods pyright exempts from ``reportImplicitOverride`` (constructors)."""


class OverrideSettings:
    """Options of the override rules."""

    __slots__ = ("exempt_dunders", "import_from")

    def __init__(self, *, exempt_dunders: bool = False, import_from: str = "typing_extensions") -> None:
        self.exempt_dunders: bool = exempt_dunders
        self.import_from: str = import_from


def _is_private(name: str) -> bool:
    return name.startswith("__") and not name.endswith("__")


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def override_name(resolver: Resolver, summary: ModuleSummary) -> str | None:
    """The module-level name under which ``summary`` already imports ``override``, if any."""
    for name, cands in summary.exports.items():
        if len(cands) != 1 or cands[0] < 0:
            continue
        binding = summary.bindings[cands[0]]
        if isinstance(binding, FromBinding) and binding.name == "override":
            value = resolver.binding(summary, cands[0])
            if isinstance(value, FunctionValue) and value.qualname == "typing.override":
                return name
    return None


def _insert_line(effective: EffectiveDef) -> int:
    """Line before which ``@override`` goes: below the last descriptor decorator, else on top."""
    d = effective.definition
    after = -1
    for i, kind in enumerate(effective.kinds):
        if kind in (DecoratorKind.PROPERTY, DecoratorKind.DESCRIPTOR, DecoratorKind.ACCESSOR):
            after = i
    if after + 1 < len(d.decorators):
        return d.decorators[after + 1].line
    return d.line


def _groups(defs: tuple[DefSummary, ...]) -> dict[str, list[DefSummary]]:
    out: dict[str, list[DefSummary]] = {}
    for d in defs:
        out.setdefault(d.name, []).append(d)
    return out


def _inherited_problems(resolver: Resolver, info: ClassInfo, checked: set[str]) -> Iterator[tuple[ClassInfo, str, str]]:
    """Unresolved bases of classes in ``info``'s MRO that are defined outside the checked files."""
    for entry in resolver.mro(info)[1:]:
        if isinstance(entry, Unknown) or entry.summary is None or entry.summary.path in checked:
            continue
        for text, reason in resolver.unresolved(entry):
            yield entry, text, reason


def override_findings(
    resolver: Resolver,
    summary: ModuleSummary,
    settings: OverrideSettings,
    checked: set[str],
) -> Iterator[Finding]:
    """KVC001, KVC002 and KVC007 findings of the classes of one checked module."""
    decorator_name: str | None = None
    name_known = False
    for index, cls in enumerate(summary.classes):
        info = resolver.source_class(summary, index)
        bases = resolver.bases(info)
        for text, reason in resolver.unresolved(info):
            yield Finding(
                summary.path,
                cls.line,
                cls.col + 1,
                "KVC007",
                f"base {text!r} of class {cls.name!r} cannot be resolved ({reason}); overrides of it are not checked",
            )
        mro_unknown = any(isinstance(entry, Unknown) for entry in resolver.mro(info))
        if mro_unknown:
            for owner, text, reason in _inherited_problems(resolver, info, checked):
                yield Finding(
                    summary.path,
                    cls.line,
                    cls.col + 1,
                    "KVC007",
                    f"class {cls.name!r} inherits {owner.key!r}, whose base {text!r} cannot be resolved "
                    f"({reason}); overrides of it are not checked",
                )
        for name, defs in _groups(cls.defs).items():
            if _is_private(name):
                continue
            found: ClassInfo | Unknown | None = None
            for base in bases:
                if isinstance(base, Unknown):
                    continue
                if name in TYPE_INSTANCE_VARIABLES and resolver.metaclass(base) is not None:
                    found = resolver.builtin_class("type")
                    break
                found = resolver.find_member(base, name)
                if found is not None:
                    break
            if isinstance(found, Unknown):
                continue
            if found is None and (mro_unknown or not any(d.decorators for d in defs)):
                continue
            if found is not None and (name in EXEMPT or (settings.exempt_dunders and _is_dunder(name))):
                continue
            effective = effective_def(resolver, summary, defs)
            if effective is None:
                continue
            d = effective.definition
            col = d.col + (10 if d.is_async else 4) + 1
            if found is None:
                if effective.has_override:
                    yield Finding(
                        summary.path,
                        d.line,
                        col,
                        "KVC002",
                        f"method {name!r} of class {cls.name!r} is decorated with @override but no base class defines it",
                    )
                continue
            if effective.has_override:
                continue
            if not name_known:
                decorator_name = override_name(resolver, summary)
                name_known = True
            free = "_override" if "override" in summary.exports else "override"
            fix = AddOverride(
                _insert_line(effective),
                d.line,
                decorator_name or free,
                None if decorator_name else settings.import_from,
            )
            yield Finding(
                summary.path,
                d.line,
                col,
                "KVC001",
                f"method {name!r} of class {cls.name!r} overrides {found.key}.{name} without @override",
                fix,
            )
