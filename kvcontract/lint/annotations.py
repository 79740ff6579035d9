"""Annotations as comparable type expressions, and a cautious subtype test between them.

Names resolve through the module that wrote the annotation, so ``Sequence`` from
``typing`` and from ``collections.abc`` are the same type. The test answers ``None``
whenever it cannot be sure, and the rules only report a definite ``False``.
"""

from __future__ import annotations

import ast
import importlib
from typing import NamedTuple

from kvcontract.lint.module_walker import dotted_name
from kvcontract.lint.resolve import ClassInfo, FunctionValue, Resolver, Unknown
from kvcontract.lint.runtime_classes import is_stdlib_module
from kvcontract.lint.summary import ModuleSummary, Ref

__all__ = ["AnyType", "ClassType", "NoneType", "OpaqueType", "TypeExpr", "UnionType", "is_subtype", "type_of"]


class AnyType(NamedTuple):
    """``Any`` or a missing annotation: compatible with everything."""


class NoneType(NamedTuple):
    """``None`` in an annotation."""


class ClassType(NamedTuple):
    """A class (or NewType), by qualified key, with its type arguments."""

    key: str
    args: tuple[TypeExpr, ...]
    info: ClassInfo | None


class UnionType(NamedTuple):
    """``X | Y``, ``Union[X, Y]`` or ``Optional[X]``."""

    members: tuple[TypeExpr, ...]


class OpaqueType(NamedTuple):
    """An annotation that could not be understood (the test then answers ``None``)."""

    text: str


TypeExpr = AnyType | NoneType | ClassType | UnionType | OpaqueType


def _ref(node: ast.expr, summary: ModuleSummary) -> Ref | None:
    dotted = dotted_name(node)
    if dotted is None:
        return None
    name, attrs = dotted
    return Ref(name, summary.exports.get(name, ()), attrs)


def _resolved(resolver: Resolver, summary: ModuleSummary, node: ast.expr) -> ClassInfo | FunctionValue | None:
    ref = _ref(node, summary)
    if ref is None:
        return None
    value = resolver.resolve_ref(summary, ref)
    return value if isinstance(value, (ClassInfo, FunctionValue)) else None


def type_of(resolver: Resolver, summary: ModuleSummary, node: ast.expr | None) -> TypeExpr:
    """The type expression an annotation written in ``summary`` stands for."""
    if node is None:
        return AnyType()
    if isinstance(node, ast.Constant):
        if node.value is None:
            return NoneType()
        if isinstance(node.value, str):
            try:
                parsed = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return OpaqueType(node.value)
            return type_of(resolver, summary, parsed)
        return OpaqueType(repr(node.value))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([type_of(resolver, summary, node.left), type_of(resolver, summary, node.right)])
    if isinstance(node, ast.Subscript):
        value = _resolved(resolver, summary, node.value)
        special = value.qualname if isinstance(value, FunctionValue) else None
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        args = [type_of(resolver, summary, item) for item in items]
        if special == "typing.Union":
            return _union(args)
        if special == "typing.Optional":
            return _union([*args, NoneType()])
        if isinstance(value, ClassInfo):
            return ClassType(value.key, tuple(args), value)
        return OpaqueType(ast.unparse(node))
    if isinstance(node, (ast.Name, ast.Attribute)):
        value = _resolved(resolver, summary, node)
        if isinstance(value, ClassInfo):
            return ClassType(value.key, (), value)
        if isinstance(value, FunctionValue):
            if value.qualname == "typing.Any":
                return AnyType()
            if not value.qualname.startswith("typing."):
                # A NewType or another named value: compared by name only.
                return ClassType(value.qualname, (), None)
        return OpaqueType(ast.unparse(node))
    return OpaqueType(ast.unparse(node))


def _union(members: list[TypeExpr]) -> TypeExpr:
    flat: list[TypeExpr] = []
    for m in members:
        for inner in m.members if isinstance(m, UnionType) else (m,):
            if inner not in flat:
                flat.append(inner)
    return flat[0] if len(flat) == 1 else UnionType(tuple(flat))


def _runtime_subclass(sub: str, sup: str) -> bool | None:
    """``issubclass`` for two standard-library classes, which registers ABCs such as ``list``
    as a ``Sequence``; ``None`` if either is not importable from the standard library."""
    classes: list[type] = []
    for key in (sub, sup):
        module, _, name = key.rpartition(".")
        if not is_stdlib_module(module):
            return None
        try:
            value = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            return None
        if not isinstance(value, type):
            return None
        classes.append(value)
    return issubclass(classes[0], classes[1])


def _class_subtype(resolver: Resolver, sub: ClassType, sup: ClassType) -> bool | None:
    if sup.key == "builtins.object":
        return True
    if sub.key == sup.key:
        return _args_subtype(resolver, sub.args, sup.args)
    direct = _runtime_subclass(sub.key, sup.key)
    if direct is not None:
        if not direct:
            return False
        return None if sup.args else True
    if sub.info is None:
        return None
    unknown = False
    for entry in resolver.mro(sub.info):
        if isinstance(entry, Unknown):
            unknown = True
            continue
        if entry.key == sup.key:
            return None if sup.args else True
        via_runtime = _runtime_subclass(entry.key, sup.key)
        if via_runtime:
            return None if sup.args else True
    return None if unknown else False


def _args_subtype(resolver: Resolver, sub: tuple[TypeExpr, ...], sup: tuple[TypeExpr, ...]) -> bool | None:
    if not sub or not sup:
        return True
    if len(sub) != len(sup):
        return None
    verdicts = [is_subtype(resolver, a, b) for a, b in zip(sub, sup)]
    if False in verdicts:
        return False
    return None if None in verdicts else True


def is_subtype(resolver: Resolver, sub: TypeExpr, sup: TypeExpr) -> bool | None:
    """Whether every value of ``sub`` is a ``sup``: ``True``, ``False``, or ``None`` (cannot tell)."""
    if isinstance(sub, AnyType) or isinstance(sup, AnyType):
        return True
    if isinstance(sub, OpaqueType) or isinstance(sup, OpaqueType):
        return True if sub == sup else None
    if isinstance(sub, UnionType):
        verdicts = [is_subtype(resolver, m, sup) for m in sub.members]
        if False in verdicts:
            return False
        return None if None in verdicts else True
    if isinstance(sup, UnionType):
        verdicts = [is_subtype(resolver, sub, m) for m in sup.members]
        if True in verdicts:
            return True
        return None if None in verdicts else False
    if isinstance(sub, NoneType):
        return isinstance(sup, NoneType) or sup.key == "builtins.object"
    if isinstance(sup, NoneType):
        return False
    return _class_subtype(resolver, sub, sup)


def render(t: TypeExpr) -> str:
    """A short readable form of a type expression, for messages."""
    if isinstance(t, AnyType):
        return "Any"
    if isinstance(t, NoneType):
        return "None"
    if isinstance(t, OpaqueType):
        return t.text
    if isinstance(t, UnionType):
        return " | ".join(render(m) for m in t.members)
    name = t.key.rpartition(".")[2]
    return f"{name}[{', '.join(render(a) for a in t.args)}]" if t.args else name
