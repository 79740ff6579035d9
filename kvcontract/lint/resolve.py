"""Class hierarchy resolution across modules, without importing them.

Names resolve through the module summaries (code-flow aware bindings), modules load lazily
from the checked files, extra roots, installed packages and the standard library (parsed
once each), and classes without source come from run-time introspection of the standard
library. The MRO follows pyright: C3, an unresolved base kept in place as :class:`Unknown`.
"""

from __future__ import annotations

import builtins
import os
import sysconfig
from collections.abc import Callable, Iterable
from typing import NamedTuple

from typing_extensions import override

from kvcontract.lint.modules import ModuleFinder, ModuleLocation
from kvcontract.lint.runtime_classes import RuntimeClass, RuntimeModule, runtime_attribute, runtime_module
from kvcontract.lint.summary import (
    AliasBinding,
    BaseExpr,
    CallBinding,
    ClassBinding,
    ClassSummary,
    FromBinding,
    ModuleBinding,
    ModuleSummary,
    OpaqueBase,
    Ref,
)
from kvcontract.lint.typeshed_extras import extra_members
from kvcontract.lint.typing_forms import NAMED_TUPLE, TYPING_MODULES, SpecialClass, typing_form

__all__ = ["ClassInfo", "FunctionValue", "InstanceValue", "ModuleValue", "Resolver", "Unknown", "Value"]

_STDLIB_DIRS = tuple(
    os.path.abspath(p) + os.sep for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
)


def _is_stdlib_path(path: str) -> bool:
    """Whether ``path`` is a standard-library source file (installed packages excluded)."""
    return path.startswith(_STDLIB_DIRS) and "-packages" + os.sep not in path


_NAMEDTUPLE_FACTORIES = frozenset({"collections.namedtuple", "typing.NamedTuple"})
_BUILTIN_CLASSES = frozenset(name for name, value in vars(builtins).items() if isinstance(value, type))


class Unknown(NamedTuple):
    """Something that could not be resolved, and why."""

    reason: str


class ModuleValue(NamedTuple):
    """A module, by absolute name."""

    name: str


class InstanceValue(NamedTuple):
    """An instance of a class (``V = Handler()``): its class attributes are reachable."""

    cls: ClassInfo


class FunctionValue(NamedTuple):
    """A value that is not a class or module (a function, a constant), by qualified name, with
    the last name of its return annotation when it is a function that has one, and whether it
    is a ``dataclass_transform`` decorator."""

    qualname: str
    returns: str | None = None
    transform: bool = False


class ClassInfo:
    """A resolved class: its identity, own member names, and where it was defined."""

    __slots__ = ("bases", "key", "module", "mro", "name", "names", "problems", "runtime", "source", "summary")

    def __init__(
        self,
        key: str,
        name: str,
        names: frozenset[str],
        *,
        summary: ModuleSummary | None = None,
        source: ClassSummary | None = None,
        runtime: RuntimeClass | None = None,
    ) -> None:
        self.key: str = key
        self.name: str = name
        self.names: frozenset[str] = names
        self.summary: ModuleSummary | None = summary
        self.source: ClassSummary | None = source
        self.runtime: RuntimeClass | None = runtime
        self.module: str = summary.name if summary is not None else key.rpartition(".")[0]
        self.bases: list[ClassInfo | Unknown] | None = None
        self.mro: list[ClassInfo | Unknown] | None = None
        self.problems: list[tuple[str, str]] = []

    @override
    def __repr__(self) -> str:
        return f"ClassInfo({self.key})"


Value = ClassInfo | ModuleValue | InstanceValue | FunctionValue | Unknown


def _c3(lists: list[list[ClassInfo | Unknown]]) -> list[ClassInfo | Unknown]:
    """C3 merge; when no head is valid, take the first list's head (pyright's recovery)."""
    pending = [list(x) for x in lists if x]
    out: list[ClassInfo | Unknown] = []
    while pending:
        head = pending[0][0]
        for candidate in pending:
            head = candidate[0]
            if not any(any(x is head for x in other[1:]) for other in pending):
                break
        else:
            head = pending[0][0]
        out.append(head)
        pending = [kept for kept in ([x for x in lst if x is not head] for lst in pending) if kept]
    return out


def _base_text(expr: BaseExpr) -> str:
    if isinstance(expr, Ref):
        return expr.text()
    if isinstance(expr, CallBinding):
        return expr.func.text() + "(...)"
    return expr.text


class Resolver:
    """Resolves names to classes and computes MROs, loading modules on demand (each once)."""

    def __init__(
        self,
        finder: ModuleFinder,
        given: Iterable[ModuleSummary],
        parse: Callable[[ModuleLocation], ModuleSummary | None],
    ) -> None:
        self.finder = finder
        self.parse = parse
        self.by_path: dict[str, ModuleSummary] = {}
        self.by_name: dict[str, ModuleSummary] = {}
        for summary in given:
            self.by_path[summary.path] = summary
            self.by_name.setdefault(summary.name, summary)
        self.modules: dict[str, ModuleSummary | RuntimeModule | None] = {}
        self._bindings: dict[tuple[str, int], Value] = {}
        self._classes: dict[tuple[str, int], ClassInfo] = {}
        self._runtime: dict[tuple[str, str], ClassInfo] = {}
        self._special: dict[str, ClassInfo] = {}
        self._active: set[tuple[str, int]] = set()
        self._active_attrs: set[tuple[str, str]] = set()
        self._active_mro: set[int] = set()
        self.object: ClassInfo = self.builtin_class("object")

    def add_given(self, summary: ModuleSummary) -> None:
        """Add a checked module after construction (the flake8 plugin sees one file at a time)."""
        self.by_path[summary.path] = summary
        self.by_name[summary.name] = summary
        self.modules.pop(summary.name, None)

    # -- modules ------------------------------------------------------------------

    def module(self, name: str) -> ModuleSummary | RuntimeModule | None:
        """The summary of module ``name`` (parsed on first use), a runtime description, or ``None``."""
        if name in self.modules:
            return self.modules[name]
        self.modules[name] = None
        loc = self.finder.find(name)
        result: ModuleSummary | RuntimeModule | None
        if loc is None:
            result = self.by_name.get(name)
        elif loc.kind in ("source", "stub"):
            result = self.by_path.get(loc.path) or self.parse(loc)
        elif loc.kind == "namespace":
            result = ModuleSummary("", name, True, False, 0, None, (), {}, (), None, ())
        else:
            result = runtime_module(name)
        self.modules[name] = result
        return result

    def _exports(self, module: str, name: str, seen: set[str]) -> bool:
        """Whether ``from module import *`` brings ``name``."""
        if module in seen:
            return False
        seen.add(module)
        found = self.module(module)
        if found is None:
            return False
        if isinstance(found, RuntimeModule):
            return not name.startswith("_") and (name in found.classes or name in found.others)
        if found.all_names is not None:
            return name in found.all_names
        if name.startswith("_"):
            return False
        return name in found.exports or any(self._exports(star, name, seen) for star in found.stars)

    def module_attr(self, module: str, name: str) -> Value:
        """``module.name``: a name of the module, one it star-imports, or a submodule."""
        if module in TYPING_MODULES:
            special = self._typing(name)
            if special is not None:
                return special
        key = (module, name)
        if key in self._active_attrs:
            # ``from pkg import sub`` inside ``pkg/__init__.py`` binds the submodule.
            if self.module(f"{module}.{name}") is not None:
                return ModuleValue(f"{module}.{name}")
            return Unknown(f"{module}.{name} is defined circularly")
        self._active_attrs.add(key)
        try:
            return self._module_attr(module, name)
        finally:
            self._active_attrs.discard(key)

    def _module_attr(self, module: str, name: str) -> Value:
        found = self.module(module)
        if found is None:
            return Unknown(f"module {module!r} was not found")
        submodule = f"{module}.{name}"
        if isinstance(found, RuntimeModule):
            if name in found.classes:
                return self.runtime_class(found.classes[name])
            if name in found.others:
                return FunctionValue(found.others[name])
            if self.module(submodule) is not None:
                return ModuleValue(submodule)
            return Unknown(f"module {module!r} has no attribute {name!r}")
        value = self._source_module_attr(found, module, name)
        if not isinstance(value, (ClassInfo, ModuleValue)) and _is_stdlib_path(found.path):
            # Standard-library names that are classes at run time but not in the source
            # (``ModuleType = type(sys)``, lazy module ``__getattr__``): introspect them.
            runtime = runtime_attribute(module, name)
            if runtime is not None:
                return self.runtime_class(runtime)
        return value

    def _source_module_attr(self, found: ModuleSummary, module: str, name: str) -> Value:
        cands = found.exports.get(name)
        if cands is not None and any(c >= 0 for c in cands):
            return self.resolve_name(found, name, cands)
        submodule = f"{module}.{name}"
        # Submodules before star imports: a star import rarely shadows a sibling module, and
        # this spares parsing large star-imported stubs for every submodule access.
        if found.is_package and self.module(submodule) is not None:
            return ModuleValue(submodule)
        for star in reversed(found.stars):
            if self._exports(star, name, set()):
                value = self.module_attr(star, name)
                if not (isinstance(value, Unknown) and "circular" in value.reason):
                    return value
        if found.error is not None:
            return Unknown(f"module {module!r} has a syntax error")
        return Unknown(f"module {module!r} has no attribute {name!r}")

    def _typing(self, name: str) -> Value | None:
        form = typing_form(name)
        if form is None:
            return None
        if form.special is not None:
            return self.special_class(form.special)
        if form.alias is not None:
            owner, qualname = form.alias
            value: Value = ModuleValue(owner)
            for part in qualname.split("."):
                value = self.attr(value, part)
            return value
        assert form.marker is not None
        return FunctionValue(form.marker)

    # -- names --------------------------------------------------------------------

    def builtin(self, name: str) -> Value:
        """A name bound in no scope: a builtin, or undefined."""
        value = self.module_attr("builtins", name)
        if isinstance(value, Unknown):
            return Unknown(f"name {name!r} is not defined")
        return value

    def builtin_class(self, name: str) -> ClassInfo:
        """The builtin class ``name`` (``object``, ``tuple``, ``dict``...)."""
        found = runtime_module("builtins")
        assert found is not None
        return self.runtime_class(found.classes[name])

    def resolve_name(self, summary: ModuleSummary, name: str, cands: tuple[int, ...]) -> Value:
        """The value of ``name`` given the bindings that may reach its use."""
        real = [c for c in cands if c >= 0]
        if not real:
            if name in _BUILTIN_CLASSES:
                # No star import rebinds ``property`` or ``object``: skip loading star modules.
                return self.builtin(name)
            for star in reversed(summary.stars):
                if self._exports(star, name, set()):
                    return self.module_attr(star, name)
            return self.builtin(name)
        values = [self.binding(summary, c) for c in real]
        first = values[0]
        if all(v is first or (not isinstance(v, ClassInfo) and v == first) for v in values[1:]):
            return first
        if _is_stdlib_path(summary.path):
            # typeshed gives one definition where the stdlib swaps in a C version: take the last.
            return self.binding(summary, max(real))
        classes = [c for c in real if isinstance(summary.bindings[c], ClassBinding)]
        if classes:
            # As pyright: a ``class`` statement declares the name's type, which other bindings
            # (an import in ``try:``, say) do not change.
            return self.binding(summary, max(classes))
        return Unknown(f"{name!r} is bound to different values on different code paths")

    def resolve_ref(self, summary: ModuleSummary, ref: Ref) -> Value:
        """The value of a dotted name written in ``summary``."""
        value = self.resolve_name(summary, ref.root, ref.cands)
        for attr in ref.attrs:
            value = self.attr(value, attr)
        return value

    def attr(self, value: Value, name: str) -> Value:
        """``value.name`` for modules and for classes nested in classes."""
        if isinstance(value, ModuleValue):
            return self.module_attr(value.name, name)
        if isinstance(value, InstanceValue):
            value = value.cls
        if isinstance(value, ClassInfo):
            for entry in self.mro(value):
                if isinstance(entry, Unknown):
                    return entry
                if entry.source is not None and entry.summary is not None:
                    cands = entry.source.scope.get(name)
                    if cands is not None:
                        return self.resolve_name(entry.summary, name, cands)
                if name in entry.names:
                    return Unknown(f"{entry.name}.{name} is not a class")
            return Unknown(f"class {value.name!r} has no attribute {name!r}")
        if isinstance(value, FunctionValue):
            return Unknown(f"{value.qualname}.{name} is an attribute of a value that is not a class")
        return value

    def binding(self, summary: ModuleSummary, index: int) -> Value:
        """The value of binding ``index`` of ``summary`` (cached, cycles give :class:`Unknown`)."""
        key = (summary.path or summary.name, index)
        cached = self._bindings.get(key)
        if cached is not None:
            return cached
        if key in self._active:
            return Unknown("circular definition")
        self._active.add(key)
        try:
            value = self._binding(summary, index)
        finally:
            self._active.discard(key)
        self._bindings[key] = value
        return value

    def _binding(self, summary: ModuleSummary, index: int) -> Value:
        b = summary.bindings[index]
        if isinstance(b, ClassBinding):
            info = self.source_class(summary, b.class_index)
            return self._decorated(summary, info)
        if isinstance(b, FromBinding):
            return self.module_attr(b.module, b.name)
        if isinstance(b, ModuleBinding):
            return ModuleValue(b.module)
        if isinstance(b, AliasBinding):
            return self.resolve_ref(summary, b.ref)
        if isinstance(b, CallBinding):
            return self.call(summary, b)
        return FunctionValue(f"{summary.name}.{b.qualname}", b.returns, b.transform)

    def _decorated(self, summary: ModuleSummary, info: ClassInfo) -> Value:
        """A class as its name sees it after its decorators: as pyright, a decorator that is
        declared to return ``Any`` (called, or bare without ``dataclass_transform``) turns the
        name into ``Any``."""
        assert info.source is not None
        for deco in info.source.decorators:
            value = self.resolve_ref(summary, deco.ref) if deco.ref is not None else None
            if isinstance(value, FunctionValue) and value.returns == "Any" and (deco.call or not value.transform):
                return Unknown(f"class {info.name!r} is decorated by {value.qualname}, declared to return Any")
        return info

    def call(self, summary: ModuleSummary, call: CallBinding) -> Value:
        """The value of a call: a named tuple class for ``namedtuple``/``NamedTuple``, a named value
        for ``NewType``, else unknown."""
        func = self.resolve_ref(summary, call.func)
        if isinstance(func, FunctionValue) and func.qualname == "typing.NewType" and call.first_arg:
            return FunctionValue(f"{summary.name}.{call.first_arg}")
        named = (isinstance(func, FunctionValue) and func.qualname in _NAMEDTUPLE_FACTORIES) or (
            isinstance(func, ClassInfo) and func.key == NAMED_TUPLE.key
        )
        if named:
            name = call.first_arg or "namedtuple"
            info = ClassInfo(f"{summary.name}.{name}", name, NAMED_TUPLE.names)
            info.bases = [self.special_class(NAMED_TUPLE)]
            return info
        if isinstance(func, ClassInfo) and func.source is not None:
            return InstanceValue(func)
        return Unknown(f"the result of calling {call.func.text()}()")

    # -- classes ------------------------------------------------------------------

    def source_class(self, summary: ModuleSummary, index: int) -> ClassInfo:
        """The class of ``class`` statement ``index`` of ``summary``."""
        key = (summary.path or summary.name, index)
        info = self._classes.get(key)
        if info is None:
            cls = summary.classes[index]
            qualified = f"{summary.name}.{cls.qualname}"
            info = ClassInfo(qualified, cls.name, cls.names | extra_members(qualified), summary=summary, source=cls)
            self._classes[key] = info
        return info

    def runtime_class(self, rc: RuntimeClass) -> ClassInfo:
        """A class described from run time."""
        key = (rc.module, rc.qualname)
        info = self._runtime.get(key)
        if info is None:
            qualified = f"{rc.module}.{rc.qualname}"
            info = ClassInfo(qualified, rc.qualname.rpartition(".")[2], rc.names | extra_members(qualified), runtime=rc)
            self._runtime[key] = info
            info.mro = [info, *(self.runtime_class(c) for c in rc.mro)]
            info.bases = info.mro[1:2]
        return info

    def special_class(self, special: SpecialClass) -> ClassInfo:
        """A class that type checkers synthesize (``Generic``, ``Protocol``, ``NamedTuple``...)."""
        info = self._special.get(special.key)
        if info is None:
            info = ClassInfo(special.key, special.key.rpartition(".")[2], special.names)
            self._special[special.key] = info
            base = self.builtin_class(special.base)
            info.bases = [base]
            info.mro = [info, *self.mro(base)]
        return info

    def base_value(self, summary: ModuleSummary, expr: BaseExpr) -> ClassInfo | Unknown:
        """What one base-class expression of a ``class`` statement resolves to."""
        if isinstance(expr, OpaqueBase):
            return Unknown(f"a base class given as {expr.text}")
        value = self.resolve_ref(summary, expr) if isinstance(expr, Ref) else self.call(summary, expr)
        if isinstance(value, (ClassInfo, Unknown)):
            return value
        if isinstance(value, ModuleValue):
            return Unknown(f"{value.name!r} is a module, not a class")
        if isinstance(value, InstanceValue):
            return Unknown(f"an instance of {value.cls.key!r} is not a class")
        return Unknown(f"{value.qualname!r} is not a class")

    def bases(self, info: ClassInfo) -> list[ClassInfo | Unknown]:
        """The direct bases of ``info``, resolved; unresolved ones are kept as :class:`Unknown`."""
        if info.bases is not None:
            return info.bases
        out: list[ClassInfo | Unknown] = []
        if info.source is not None and info.summary is not None:
            for expr in info.source.bases:
                value = self.base_value(info.summary, expr)
                if isinstance(value, Unknown):
                    info.problems.append((_base_text(expr), value.reason))
                out.append(value)
            if not any(isinstance(b, ClassInfo) for b in out) and info is not self.object:
                # As pyright: a class none of whose bases is a known class also derives from object.
                out.append(self.object)
        info.bases = out
        return out

    def mro(self, info: ClassInfo) -> list[ClassInfo | Unknown]:
        """The method resolution order of ``info``, starting with itself."""
        if info.mro is not None:
            return info.mro
        ident = id(info)
        if ident in self._active_mro:
            return [info, Unknown("circular inheritance")]
        self._active_mro.add(ident)
        try:
            bases = self._mro_bases(info)
            lists: list[list[ClassInfo | Unknown]] = []
            for b in bases:
                lists.append(self.mro(b) if isinstance(b, ClassInfo) else [b])
            lists.append(list(bases))
            info.mro = [info, *_c3(lists)]
        finally:
            self._active_mro.discard(ident)
        return info.mro

    def _mro_bases(self, info: ClassInfo) -> list[ClassInfo | Unknown]:
        """Bases as pyright linearizes them: ``Generic`` is left out of protocols, and before
        a later subscripted base."""
        bases = self.bases(info)
        exprs = info.source.bases if info.source is not None else ()
        generic = self._special.get("typing.Generic")
        if generic is None or not any(b is generic for b in bases):
            return bases
        protocol = self._special.get("typing.Protocol")
        is_protocol = protocol is not None and any(b is protocol for b in bases)
        out: list[ClassInfo | Unknown] = []
        for i, base in enumerate(bases):
            later_generic = any(isinstance(e, Ref) and e.subscripted for e in exprs[i + 1 :])
            if base is generic and (is_protocol or later_generic):
                continue
            out.append(base)
        return out

    def metaclass(self, info: ClassInfo) -> ClassInfo | None:
        """The declared or inherited metaclass of a class from source (``None``: plain ``type``)."""
        if info.source is None or info.summary is None:
            return None
        if info.source.metaclass is not None:
            value = self.resolve_ref(info.summary, info.source.metaclass)
            if isinstance(value, ClassInfo) and value.key != "builtins.type":
                return value
        for base in self.bases(info):
            if isinstance(base, ClassInfo) and base.source is not None and base is not info:
                found = self.metaclass(base)
                if found is not None:
                    return found
        return None

    def find_member(self, base: ClassInfo, name: str) -> ClassInfo | Unknown | None:
        """The first class in ``base``'s MRO that defines ``name``; an :class:`Unknown` met first
        stops the search (it might define it)."""
        for entry in self.mro(base):
            if isinstance(entry, Unknown):
                return entry
            if name in entry.names:
                return entry
        return None

    def unresolved(self, info: ClassInfo) -> list[tuple[str, str]]:
        """The unresolved direct bases of ``info`` as (expression, reason)."""
        self.bases(info)
        return info.problems
