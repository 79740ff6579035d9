"""Members that typeshed declares on standard-library classes although their runtime source
does not define them; type checkers see them, so overrides of them need ``@override`` too."""

from __future__ import annotations

import ast

__all__ = ["TYPE_INSTANCE_VARIABLES", "extra_members"]

_AST_NODES = frozenset(
    name for name, value in vars(ast).items() if isinstance(value, type) and issubclass(value, ast.AST)
)

_EXTRA: dict[str, frozenset[str]] = {
    # typeshed lists a ``visit_<Node>`` method for every node class.
    "ast.NodeVisitor": frozenset(f"visit_{name}" for name in _AST_NODES),
    # typeshed gives every stream ``read`` and ``write`` attributes.
    "_io._IOBase": frozenset({"read", "write"}),
    # ``types.ModuleType``: typeshed declares ``__getattr__`` for module-level ``__getattr__``.
    "builtins.module": frozenset({"__getattr__"}),
    # The C pickler looks ``reducer_override`` up dynamically; typeshed declares it.
    "_pickle.Pickler": frozenset({"reducer_override"}),
}

TYPE_INSTANCE_VARIABLES = frozenset(
    {"__bases__", "__dict__", "__module__", "__name__", "__qualname__", "__annotations__"}
)
"""Attributes typeshed declares on ``type`` instances: pyright finds them on any class whose
metaclass is not plain ``type``, so methods of these names in such a class's subclasses override."""


def extra_members(key: str) -> frozenset[str]:
    """The members typeshed adds to the class with qualified ``key``."""
    return _EXTRA.get(key, frozenset())
