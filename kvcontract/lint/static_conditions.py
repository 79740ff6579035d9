"""Static truth of ``if`` tests that type checkers evaluate: ``TYPE_CHECKING``, versions, platforms.

Code under a statically false test is unreachable for pyright, so its classes are not
checked and its bindings do not exist; kvcontract-lint follows the same rules.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from typing import NamedTuple

__all__ = ["Target", "static_truth"]

_OS_NAMES = {"linux": "posix", "darwin": "posix", "win32": "nt"}


class Target(NamedTuple):
    """The Python version and platform that static conditions are evaluated for."""

    version: tuple[int, int]
    platform: str


def _version_tuple(node: ast.expr) -> tuple[int, ...] | None:
    if not isinstance(node, ast.Tuple) or not node.elts:
        return None
    out: list[int] = []
    for elt in node.elts:
        if isinstance(elt, ast.Constant) and type(elt.value) is int:
            out.append(elt.value)
        else:
            break
    return tuple(out) if out else None


def _is_attr_of(node: ast.expr, names: Collection[str], attr: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id in names
    )


def _order(op: ast.cmpop, left: tuple[int, ...], right: tuple[int, ...]) -> bool | None:
    if isinstance(op, ast.Lt):
        return left < right
    if isinstance(op, ast.LtE):
        return left <= right
    if isinstance(op, ast.Gt):
        return left > right
    if isinstance(op, ast.GtE):
        return left >= right
    if isinstance(op, ast.Eq):
        return left == right
    if isinstance(op, ast.NotEq):
        return left != right
    return None


def _compare(node: ast.Compare, target: Target, sys_names: Collection[str], os_names: Collection[str]) -> bool | None:
    if len(node.ops) != 1:
        return None
    op = node.ops[0]
    left, right = node.left, node.comparators[0]
    if _is_attr_of(left, sys_names, "version_info"):
        wanted = _version_tuple(right)
        if wanted is None:
            return None
        return _order(op, target.version[: len(wanted)], wanted)
    if (
        isinstance(left, ast.Subscript)
        and _is_attr_of(left.value, sys_names, "version_info")
        and isinstance(left.slice, ast.Constant)
        and left.slice.value == 0
        and isinstance(right, ast.Constant)
        and type(right.value) is int
    ):
        return _order(op, target.version[:1], (right.value,))
    if isinstance(right, ast.Constant) and isinstance(right.value, str) and isinstance(op, (ast.Eq, ast.NotEq)):
        if _is_attr_of(left, sys_names, "platform"):
            actual = target.platform
        elif _is_attr_of(left, os_names, "name"):
            actual = _OS_NAMES.get(target.platform, "posix")
        else:
            return None
        return (actual == right.value) is isinstance(op, ast.Eq)
    return None


def static_truth(
    node: ast.expr,
    target: Target,
    sys_names: Collection[str],
    typing_names: Collection[str],
    os_names: Collection[str],
) -> bool | None:
    """``True``/``False`` when ``node`` is a condition type checkers decide statically, else ``None``."""
    if isinstance(node, ast.Name):
        return True if node.id == "TYPE_CHECKING" else None
    if isinstance(node, ast.Attribute):
        if node.attr == "TYPE_CHECKING" and isinstance(node.value, ast.Name) and node.value.id in typing_names:
            return True
        return None
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, bool) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = static_truth(node.operand, target, sys_names, typing_names, os_names)
        return None if inner is None else not inner
    if isinstance(node, ast.BoolOp):
        values = [static_truth(v, target, sys_names, typing_names, os_names) for v in node.values]
        if any(v is None for v in values):
            return None
        return any(values) if isinstance(node.op, ast.Or) else all(values)
    if isinstance(node, ast.Compare):
        return _compare(node, target, sys_names, os_names)
    if isinstance(node, ast.NamedExpr):
        return static_truth(node.value, target, sys_names, typing_names, os_names)
    return None
