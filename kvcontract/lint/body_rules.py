"""How a contract method's body uses its key parameters (KVC004 and KVC005).

KVC004: ``list(keys)``/``tuple(keys)`` of a parameter the contract types as ``Sequence``,
where the copy is only read (iterated, measured, indexed, tested with ``in``), so the
parameter itself does the same job. A copy that is later mutated or handed on is left alone.

KVC005: a parameter the contract types as ``Iterable`` (possibly a one-shot iterator)
that is measured with ``len()``, indexed, or consumed more than once.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import NamedTuple, TypeGuard

__all__ = ["Materialization", "Reuse", "iterable_reuses", "redundant_materializations"]

_READ_ONLY_CALLS = frozenset(
    {
        "len",
        "enumerate",
        "zip",
        "sorted",
        "reversed",
        "set",
        "frozenset",
        "any",
        "all",
        "sum",
        "min",
        "max",
        "iter",
        "list",
        "tuple",
    }
)
_CONSUMING_CALLS = frozenset(
    {
        "list",
        "tuple",
        "set",
        "frozenset",
        "sorted",
        "sum",
        "min",
        "max",
        "any",
        "all",
        "enumerate",
        "zip",
        "dict",
        "iter",
        "map",
        "filter",
        "reversed",
    }
)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


class Materialization(NamedTuple):
    """A redundant ``list(param)``/``tuple(param)`` call."""

    call: ast.Call
    param: str


class Reuse(NamedTuple):
    """A use of an ``Iterable`` parameter that needs more than one pass."""

    node: ast.expr
    param: str
    what: str


def _parents(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[ast.AST, ast.AST]:
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(func):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    return parents


def _bound_names(target: ast.AST) -> Iterator[str]:
    for node in ast.walk(target):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            yield node.id


def _parameter_names(args: ast.arguments) -> set[str]:
    named = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {arg.arg for arg in named if arg is not None}


def _shadowed(node: ast.Name, parents: dict[ast.AST, ast.AST], func: ast.AST) -> bool:
    """Whether ``node`` names something the method's parameter is hidden behind: a
    comprehension's target (outside its first source, which the enclosing scope evaluates)
    or a nested function's or lambda's parameter."""
    child: ast.AST = node
    parent = parents.get(child)
    while parent is not None and parent is not func:
        if isinstance(parent, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            bound = {name for g in parent.generators for name in _bound_names(g.target)}
            if node.id in bound and not any(n is node for n in ast.walk(parent.generators[0].iter)):
                return True
        if isinstance(parent, _FUNCTIONS) and node.id in _parameter_names(parent.args):
            return True
        child = parent
        parent = parents.get(child)
    return False


def _rebinds(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list[int]]:
    """Lines where each name is (re)bound in the function body, comprehensions excluded."""
    out: dict[str, list[int]] = {}
    for node in ast.walk(func):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        elif isinstance(node, ast.NamedExpr):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            for name in _bound_names(target):
                out.setdefault(name, []).append(getattr(node, "lineno", 0) or getattr(target, "lineno", 0))
    return out


def _is_builtin_call(node: ast.AST, names: frozenset[str]) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names


def _read_only(node: ast.expr, parent: ast.AST | None) -> bool:
    """Whether the value of ``node`` is only read where it stands (no copy would be needed)."""
    if isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)):
        return parent.iter is node
    if isinstance(parent, ast.Call):
        return _is_builtin_call(parent, _READ_ONLY_CALLS) and node in parent.args and not parent.keywords
    if isinstance(parent, ast.Subscript):
        return parent.value is node and isinstance(parent.ctx, ast.Load)
    if isinstance(parent, ast.Compare):
        return any(c is node and isinstance(op, (ast.In, ast.NotIn)) for op, c in zip(parent.ops, parent.comparators))
    return isinstance(parent, (ast.Starred, ast.YieldFrom))


def _local_only_read(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    name: str,
    parents: dict[ast.AST, ast.AST],
    rebinds: dict[str, list[int]],
) -> bool:
    """Whether local ``name`` is bound once and every load of it only reads it."""
    if len(rebinds.get(name, ())) != 1:
        return False
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Name)
            and node.id == name
            and isinstance(node.ctx, ast.Load)
            and not _read_only(node, parents.get(node))
        ):
            return False
    return True


def redundant_materializations(
    func: ast.FunctionDef | ast.AsyncFunctionDef, params: frozenset[str]
) -> list[Materialization]:
    """``list(p)``/``tuple(p)`` of Sequence parameters ``params`` whose copy is only read."""
    if not params:
        return []
    parents = _parents(func)
    rebinds = _rebinds(func)
    if "list" in rebinds or "tuple" in rebinds:
        return []
    out: list[Materialization] = []
    for node in ast.walk(func):
        if not (_is_builtin_call(node, frozenset({"list", "tuple"})) and isinstance(node, ast.Call)):
            continue
        if len(node.args) != 1 or node.keywords:
            continue
        arg = node.args[0]
        if not isinstance(arg, ast.Name) or arg.id not in params or _shadowed(arg, parents, func):
            continue
        if any(line < node.lineno for line in rebinds.get(arg.id, ())):
            continue
        parent = parents.get(node)
        if _read_only(node, parent) or (
            isinstance(parent, ast.Assign)
            and parent.value is node
            and len(parent.targets) == 1
            and isinstance(parent.targets[0], ast.Name)
            and _local_only_read(func, parent.targets[0].id, parents, rebinds)
        ):
            out.append(Materialization(node, arg.id))
    return out


def _consumes(node: ast.expr, parent: ast.AST | None) -> bool:
    if isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)):
        return parent.iter is node
    if isinstance(parent, ast.Call):
        if _is_builtin_call(parent, _CONSUMING_CALLS):
            return node in parent.args
        return isinstance(parent.func, ast.Attribute) and parent.func.attr == "join" and node in parent.args
    if isinstance(parent, ast.Compare):
        return any(c is node and isinstance(op, (ast.In, ast.NotIn)) for op, c in zip(parent.ops, parent.comparators))
    if isinstance(parent, ast.Assign):
        return parent.value is node and any(isinstance(t, (ast.Tuple, ast.List)) for t in parent.targets)
    return isinstance(parent, (ast.Starred, ast.YieldFrom))


def _in_loop(node: ast.AST, parents: dict[ast.AST, ast.AST], func: ast.AST) -> bool:
    """Whether ``node`` runs repeatedly: inside a loop body or a comprehension, not as its source."""
    child = node
    parent = parents.get(child)
    while parent is not None and parent is not func:
        if isinstance(parent, (ast.For, ast.AsyncFor)) and child is not parent.iter and child is not parent.target:
            return True
        if isinstance(parent, ast.While):
            return True
        if isinstance(parent, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            generators = parent.generators
            if not (generators and child is generators[0]):
                return True
        if isinstance(parent, ast.comprehension) and child is not parent.iter:
            return True
        if isinstance(parent, _FUNCTIONS):
            return True
        child = parent
        parent = parents.get(child)
    return False


_BLOCKS = ("body", "orelse", "finalbody")
Step = tuple[ast.AST, str, int]


def _statements(owner: ast.AST, field: str) -> list[ast.stmt]:
    """The statements in block ``field`` (``body``, ``orelse``...) of ``owner``, if it has one."""
    block: object = getattr(owner, field, None)
    if not _is_list(block):
        return []
    return [stmt for stmt in block if isinstance(stmt, ast.stmt)]


def _is_list(value: object) -> TypeGuard[list[object]]:
    return isinstance(value, list)


def _steps(node: ast.AST, parents: dict[ast.AST, ast.AST], func: ast.AST) -> list[Step]:
    """The statement blocks around ``node``, innermost first: (owner, block field, index)."""
    out: list[Step] = []
    child = node
    parent = parents.get(child)
    while parent is not None and child is not func:
        for field in _BLOCKS:
            for index, stmt in enumerate(_statements(parent, field)):
                if stmt is child:
                    out.append((parent, field, index))
        child = parent
        parent = parents.get(child)
    return out


def _may_follow(first: ast.AST, second: ast.AST, parents: dict[ast.AST, ast.AST], func: ast.AST) -> bool:
    """Whether ``second`` (later in the source) can run after ``first`` on some path: not when
    they sit in the two branches of one ``if``, nor when ``first``'s block returns or raises
    before reaching ``second``."""
    a, b = _steps(first, parents, func), _steps(second, parents, func)
    for owner, field, _ in a:
        for other, other_field, _ in b:
            if owner is other and isinstance(owner, ast.If) and field != other_field:
                return False
    for owner, field, index in a:
        block = _statements(owner, field)
        inside = any(o is owner and f == field and i >= index for o, f, i in b)
        if inside:
            return True
        if any(isinstance(stmt, (ast.Return, ast.Raise)) for stmt in block[index:]):
            return False
    return True


def iterable_reuses(func: ast.FunctionDef | ast.AsyncFunctionDef, params: frozenset[str]) -> list[Reuse]:
    """Uses of Iterable parameters ``params`` that need ``len()``, indexing or a second pass."""
    if not params:
        return []
    parents = _parents(func)
    rebinds = _rebinds(func)
    uses: dict[str, list[ast.Name]] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and node.id in params and isinstance(node.ctx, ast.Load):
            if _shadowed(node, parents, func):
                continue
            if not any(line <= node.lineno for line in rebinds.get(node.id, ())):
                uses.setdefault(node.id, []).append(node)
    out: list[Reuse] = []
    for param, nodes in uses.items():
        nodes.sort(key=lambda n: (n.lineno, n.col_offset))
        consumed: ast.Name | None = None
        for node in nodes:
            parent = parents.get(node)
            if isinstance(parent, ast.Call) and _is_builtin_call(parent, frozenset({"len"})) and node in parent.args:
                out.append(Reuse(node, param, "measured with len()"))
            elif isinstance(parent, ast.Subscript) and parent.value is node:
                out.append(Reuse(node, param, "indexed"))
            elif _consumes(node, parent):
                if consumed is not None and _may_follow(consumed, node, parents, func):
                    out.append(Reuse(node, param, f"iterated again (first at line {consumed.lineno})"))
                elif _in_loop(node, parents, func):
                    out.append(Reuse(node, param, "iterated inside a loop"))
                consumed = consumed or node
    return out
