"""What kvcontract-lint keeps of one parsed module: the bindings and classes that resolution needs.

Summaries are plain named tuples so that worker processes can send them back cheaply.
A name at a point of the code is a :class:`Ref`: its root name, the bindings of the
module's binding table that may reach that point (code flow), and the attributes after it.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "UNBOUND",
    "AliasBinding",
    "BaseExpr",
    "Binding",
    "CallBinding",
    "ClassBinding",
    "ClassSummary",
    "Decorator",
    "DefSummary",
    "FromBinding",
    "ModuleBinding",
    "ModuleSummary",
    "OpaqueBase",
    "OpaqueBinding",
    "Ref",
    "SyntaxProblem",
]

UNBOUND = -1
"""Candidate id meaning "unbound on some path" (dropped at resolution, as type checkers do)."""


class Ref(NamedTuple):
    """A dotted name as written (``root.attr1.attr2``) with the bindings ``root`` may have there.

    ``cands`` is empty when ``root`` is bound in no enclosing scope: it is then a builtin.
    """

    root: str
    cands: tuple[int, ...]
    attrs: tuple[str, ...]
    subscripted: bool = False

    def text(self) -> str:
        """The name as written, with ``[...]`` when it was subscripted."""
        dotted = ".".join((self.root, *self.attrs))
        return dotted + "[...]" if self.subscripted else dotted


class ClassBinding(NamedTuple):
    """A name bound by a ``class`` statement: its position in :attr:`ModuleSummary.classes`."""

    class_index: int


class ModuleBinding(NamedTuple):
    """A name bound to a module by ``import a.b`` (binds ``a``) or ``import a.b as c``."""

    module: str


class FromBinding(NamedTuple):
    """A name bound by ``from module import name`` (module made absolute)."""

    module: str
    name: str


class AliasBinding(NamedTuple):
    """A name bound to another name: ``Base = pkg.mod.Base`` or ``Alias = Base[int]``."""

    ref: Ref


class CallBinding(NamedTuple):
    """A name bound to the result of a call, such as ``namedtuple("P", "x y")``."""

    func: Ref
    first_arg: str | None


class OpaqueBinding(NamedTuple):
    """A name bound to something that is not a class (a function, a value).

    ``qualname`` is where it was defined, which identifies functions used as decorators;
    ``returns`` is the last name of a function's return annotation (``"Any"``), if any, and
    ``transform`` says whether the function is decorated with ``dataclass_transform``.
    """

    qualname: str
    returns: str | None = None
    transform: bool = False


Binding = ClassBinding | ModuleBinding | FromBinding | AliasBinding | CallBinding | OpaqueBinding


class OpaqueBase(NamedTuple):
    """A base class expression that is neither a name nor a call (``*bases``, a lambda...)."""

    text: str


BaseExpr = Ref | CallBinding | OpaqueBase


class Decorator(NamedTuple):
    """One decorator of a method: the name it calls or is (``None`` if not a name)."""

    ref: Ref | None
    call: bool
    line: int
    col: int


class DefSummary(NamedTuple):
    """One ``def`` in a class body, with its decorators, top to bottom."""

    name: str
    line: int
    col: int
    decorators: tuple[Decorator, ...]
    is_async: bool


class ClassSummary(NamedTuple):
    """One reachable ``class`` statement of a module (nested and local classes included)."""

    name: str
    qualname: str
    line: int
    col: int
    bases: tuple[BaseExpr, ...]
    names: frozenset[str]
    defs: tuple[DefSummary, ...]
    scope: dict[str, tuple[int, ...]]
    decorators: tuple[Decorator, ...]
    metaclass: Ref | None


class SyntaxProblem(NamedTuple):
    """Why a module could not be parsed, and where."""

    line: int
    col: int
    message: str


class ModuleSummary(NamedTuple):
    """Everything resolution and the override rules need of one module."""

    path: str
    name: str
    is_package: bool
    is_stub: bool
    lines: int
    error: SyntaxProblem | None
    bindings: tuple[Binding, ...]
    exports: dict[str, tuple[int, ...]]
    stars: tuple[str, ...]
    all_names: tuple[str, ...] | None
    classes: tuple[ClassSummary, ...]
