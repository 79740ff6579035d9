"""The walk of one module's statements into its summary (:mod:`.summary`'s records): bindings with
code flow, classes, their members and bases.

Only statements are walked: module and class bodies fully, method bodies for the
``self.attr`` assignments that make instance attributes, and other function bodies only
when they hold a ``class`` statement. This keeps the per-file cost close to the parse.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from kvcontract.lint.static_conditions import Target, static_truth
from kvcontract.lint.summary import (
    UNBOUND,
    AliasBinding,
    BaseExpr,
    Binding,
    CallBinding,
    ClassBinding,
    ClassSummary,
    Decorator,
    DefSummary,
    FromBinding,
    ModuleBinding,
    ModuleSummary,
    OpaqueBase,
    OpaqueBinding,
    Ref,
    SyntaxProblem,
)

__all__ = ["absolute_module", "dotted_name", "summarize_source", "summary_of_error"]

State = dict[str, tuple[int, ...]]

# A plain search for the keyword, checked for leading blanks, is several times faster than a
# line-anchored pattern over whole files.
_CLASS_KEYWORD = re.compile(rb"class[ \t\\(]")

TryNode: TypeAlias = ast.Try | ast.TryStar


def absolute_module(current: str, is_package: bool, module: str | None, level: int) -> str:
    """The absolute module that ``from {'.' * level}{module} import ...`` names in ``current``."""
    if level == 0:
        return module or ""
    parts = current.split(".") if current else []
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
    if module:
        parts.append(module)
    return ".".join(parts)


def dotted_name(node: ast.expr) -> tuple[str, tuple[str, ...]] | None:
    """Root name and attributes of ``a.b.c``, or ``None`` for any other expression."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    attrs.reverse()
    return node.id, tuple(attrs)


def _ref_of(node: ast.expr) -> tuple[str, tuple[str, ...], bool] | None:
    """Root name, attributes and subscript flag of ``a.b.c`` or ``a.b.c[...]``."""
    subscripted = isinstance(node, ast.Subscript)
    dotted = dotted_name(node.value if isinstance(node, ast.Subscript) else node)
    return None if dotted is None else (*dotted, subscripted)


def _string_list(node: ast.expr) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple)):
        out: list[str] = []
        for elt in node.elts:
            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                out.append(elt.value)
            else:
                return None
        return out
    return None


def _annotation_name(node: ast.expr | None) -> str | None:
    """The last name of an annotation (``typing.Any`` -> ``"Any"``), or ``None``."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.rpartition(".")[2].partition("[")[0]
    return None


_TRANSFORMS = frozenset({"dataclass_transform", "__dataclass_transform__"})


def _callee(node: ast.expr) -> ast.expr:
    return node.func if isinstance(node, ast.Call) else node


def _is_classmethod(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "classmethod" for d in node.decorator_list)


def _merge(states: Sequence[State | None]) -> State | None:
    """Join code paths: a name may then hold any binding of any path (or be unbound)."""
    live = [s for s in states if s is not None]
    if not live:
        return None
    first = live[0]
    if len(live) == 1:
        return first
    if all(s is first for s in live):
        return first
    keys: dict[str, None] = {}
    for s in live:
        keys.update(dict.fromkeys(s))
    out: State = {}
    for key in keys:
        merged: list[int] = []
        for s in live:
            for cand in s.get(key, (UNBOUND,)):
                if cand not in merged:
                    merged.append(cand)
        out[key] = tuple(merged)
    return out


@dataclass
class _ScopeRef:
    """A function or module scope seen from nested code: its final state once walked."""

    state: State = field(default_factory=dict[str, tuple[int, ...]])


@dataclass
class _ClassBuild:
    """A class body being walked: its position among the module's classes, names it binds, defs."""

    index: int
    names: set[str] = field(default_factory=set[str])
    defs: list[DefSummary] = field(default_factory=list[DefSummary])


@dataclass(frozen=True, slots=True)
class _Context:
    """Where a block of statements stands: all the walk of a statement needs besides the state.

    ``here`` is the scope being walked when it is a module or function scope (``None`` in
    class bodies); its ``state`` follows the walk, so code nested in it sees the current
    state, and once the scope is walked it holds the final state for deferred functions.
    ``outer`` are the scopes around it, innermost first (class bodies skipped), ``qual`` the
    prefix of the qualified names it binds, ``cls`` the class body being walked. The state
    itself flows from statement to statement and splits at branches, so it travels apart.
    """

    here: _ScopeRef | None
    outer: tuple[_ScopeRef, ...]
    qual: str
    cls: _ClassBuild | None
    names: set[str] | None
    """The class body's names (``cls.names``), where each statement's bindings are recorded."""
    at_module: bool
    """Whether this is the module's own top level (where ``__all__`` and star imports count)."""


def _context(here: _ScopeRef | None, outer: tuple[_ScopeRef, ...], qual: str, cls: _ClassBuild | None) -> _Context:
    return _Context(here, outer, qual, cls, cls.names if cls is not None else None, here is not None and not outer)


class _Walker:
    """Walks the statements of one module, building its summary."""

    def __init__(self, module: str, is_package: bool, target: Target, class_lines: list[int]) -> None:
        self.module = module
        self.is_package = is_package
        self.target = target
        self.class_lines = class_lines
        self.bindings: list[Binding] = []
        self.classes: list[ClassSummary | None] = []
        self.stars: list[str] = []
        self.all_names: list[str] | None = None
        self.all_dynamic = False
        self.sys_names: set[str] = {"sys"}
        self.typing_names: set[str] = {"typing", "typing_extensions"}
        self.os_names: set[str] = {"os"}
        self.deferred: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, tuple[_ScopeRef, ...], str, int | None]] = []

    # -- bindings -----------------------------------------------------------------

    def _bind(self, state: State, name: str, binding: Binding) -> None:
        self.bindings.append(binding)
        state[name] = (len(self.bindings) - 1,)

    def _bind_name(self, state: State, name: str, binding: Binding, ctx: _Context) -> None:
        """Bind ``name`` and record it among the class body's names when walking one."""
        self._bind(state, name, binding)
        if ctx.names is not None:
            ctx.names.add(name)

    @staticmethod
    def _lookup(name: str, state: State, outer: tuple[_ScopeRef, ...]) -> tuple[int, ...]:
        found = state.get(name)
        if found is not None:
            return found
        for scope in outer:
            found = scope.state.get(name)
            if found is not None:
                return found
        return ()

    def _ref(self, node: ast.expr, state: State, ctx: _Context) -> Ref | None:
        parts = _ref_of(node)
        if parts is None:
            return None
        root, attrs, subscripted = parts
        return Ref(root, self._lookup(root, state, ctx.outer), attrs, subscripted)

    def _call(self, node: ast.Call, state: State, ctx: _Context) -> CallBinding | None:
        func = self._ref(node.func, state, ctx)
        if func is None:
            return None
        first = node.args[0] if node.args else None
        text = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
        return CallBinding(func, text)

    def _value_binding(self, value: ast.expr, name: str, state: State, ctx: _Context) -> Binding:
        if isinstance(value, (ast.Name, ast.Attribute, ast.Subscript)):
            ref = self._ref(value, state, ctx)
            if ref is not None:
                return AliasBinding(ref)
        elif isinstance(value, ast.Call):
            call = self._call(value, state, ctx)
            if call is not None:
                return call
        return OpaqueBinding(ctx.qual + name)

    def _bind_target(self, target: ast.expr, state: State, ctx: _Context) -> None:
        match target:
            case ast.Name(id=name):
                self._bind_name(state, name, OpaqueBinding(ctx.qual + name), ctx)
            case ast.Tuple(elts=elts) | ast.List(elts=elts):
                for elt in elts:
                    self._bind_target(elt, state, ctx)
            case ast.Starred(value=value):
                self._bind_target(value, state, ctx)
            case _:
                pass

    # -- statements ---------------------------------------------------------------

    def block(self, stmts: Sequence[ast.stmt], state: State, ctx: _Context) -> State | None:
        """Walk ``stmts`` from ``state``; the state at the end, or ``None`` if no path gets there."""
        current: State = state
        here = ctx.here
        for stmt in stmts:
            if here is not None:
                here.state = current
            after = self.stmt(stmt, current, ctx)
            if after is None:
                return None
            current = after
        return current

    def stmt(self, stmt: ast.stmt, state: State, ctx: _Context) -> State | None:
        """Walk one statement; returns the state after it (``None``: it never completes).

        The cases stand in the order of how often they occur, the common first.
        """
        match stmt:
            case ast.FunctionDef() | ast.AsyncFunctionDef():
                self._function(stmt, state, ctx)
            case ast.Assign(targets=targets, value=value):
                self._assign(targets, value, state, ctx)
            case ast.ImportFrom():
                self._import_from(stmt, state, ctx)
            case ast.Import(names=aliases):
                for alias in aliases:
                    if alias.asname:
                        bound, module = alias.asname, alias.name
                    else:
                        bound = module = alias.name.partition(".")[0]
                    self._bind_name(state, bound, ModuleBinding(module), ctx)
                    self._note_module_alias(bound, module)
            case ast.ClassDef(name=name):
                self._bind_name(state, name, ClassBinding(self._class(stmt, state, ctx)), ctx)
            case ast.AnnAssign(target=ast.Name() as target, value=None):
                self._bind_target(target, state, ctx)
            case ast.AnnAssign(target=ast.Name() as target, value=ast.expr() as value):
                self._assign([target], value, state, ctx)
            case ast.AugAssign(target=ast.Name(id="__all__"), value=value) if ctx.at_module:
                self._extend_all(value)
            case ast.AugAssign(target=target):
                self._bind_target(target, state, ctx)
            case ast.If():
                return self._if(stmt, state, ctx)
            case ast.Try() | ast.TryStar():
                return self._try(stmt, state, ctx)
            case ast.For() | ast.AsyncFor() | ast.While():
                return self._loop(stmt, state, ctx)
            case ast.With(items=items, body=body) | ast.AsyncWith(items=items, body=body):
                for item in items:
                    if item.optional_vars is not None:
                        self._bind_target(item.optional_vars, state, ctx)
                return self.block(body, state, ctx)
            case ast.Match(cases=cases):
                return _merge([state, *(self.block(case.body, dict(state), ctx) for case in cases)])
            case ast.Expr(value=value) if ctx.at_module:
                self._all_call(value)
            case ast.Delete(targets=deleted):
                for gone in deleted:
                    if isinstance(gone, ast.Name):
                        state[gone.id] = (UNBOUND,)
            case ast.Return() | ast.Raise() | ast.Continue() | ast.Break():
                return None
            case _:
                pass
        return state

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, state: State, ctx: _Context) -> None:
        """Bind a ``def``; a method's summary goes to its class, a body holding a class is walked later."""
        cls = ctx.cls
        if cls is not None:
            cls.defs.append(self._def_summary(node, state, ctx))
        transform = any(_annotation_name(_callee(d)) in _TRANSFORMS for d in node.decorator_list)
        binding = OpaqueBinding(ctx.qual + node.name, _annotation_name(node.returns), transform)
        self._bind_name(state, node.name, binding, ctx)
        if self._holds_class(node):
            nested = (ctx.here, *ctx.outer) if ctx.here is not None else ctx.outer
            owner = cls.index if cls is not None and _is_classmethod(node) else None
            self.deferred.append((node, nested, ctx.qual + node.name + ".<locals>.", owner))

    def _import_from(self, node: ast.ImportFrom, state: State, ctx: _Context) -> None:
        module = absolute_module(self.module, self.is_package, node.module, node.level)
        for alias in node.names:
            if alias.name == "*":
                if ctx.at_module:
                    self.stars.append(module)
                continue
            self._bind_name(state, alias.asname or alias.name, FromBinding(module, alias.name), ctx)

    def _if(self, node: ast.If, state: State, ctx: _Context) -> State | None:
        """A branch the target decides statically is walked alone; otherwise both, joined."""
        truth = static_truth(node.test, self.target, self.sys_names, self.typing_names, self.os_names)
        if truth is True:
            return self.block(node.body, state, ctx)
        if truth is False:
            return self.block(node.orelse, state, ctx)
        then = self.block(node.body, dict(state), ctx)
        other = self.block(node.orelse, dict(state), ctx) if node.orelse else state
        return _merge([then, other])

    def _loop(self, stmt: ast.For | ast.AsyncFor | ast.While, state: State, ctx: _Context) -> State | None:
        if isinstance(stmt, ast.While):
            truth = static_truth(stmt.test, self.target, self.sys_names, self.typing_names, self.os_names)
            if truth is False:
                return self.block(stmt.orelse, state, ctx)
        else:
            self._bind_target(stmt.target, state, ctx)
        body = self.block(stmt.body, dict(state), ctx)
        after = _merge([state, body]) or state
        return self.block(stmt.orelse, after, ctx)

    def _note_module_alias(self, name: str, module: str) -> None:
        if module == "sys":
            self.sys_names.add(name)
        elif module == "os":
            self.os_names.add(name)
        elif module in ("typing", "typing_extensions"):
            self.typing_names.add(name)

    def _assign(self, targets: Sequence[ast.expr], value: ast.expr, state: State, ctx: _Context) -> None:
        names = ctx.names
        for target in targets:
            if isinstance(target, ast.Name):
                if ctx.at_module and target.id == "__all__":
                    listed = _string_list(value)
                    if listed is None:
                        self.all_dynamic = True
                    else:
                        self.all_names = listed
                self._bind(state, target.id, self._value_binding(value, target.id, state, ctx))
                if names is not None:
                    names.add(target.id)
                    if target.id == "__slots__":
                        slots = _string_list(value)
                        if slots is not None:
                            names.update(slots)
                        elif isinstance(value, ast.Constant) and isinstance(value.value, str):
                            names.add(value.value)
            else:
                self._bind_target(target, state, ctx)

    def _extend_all(self, value: ast.expr) -> None:
        listed = _string_list(value)
        if listed is None or self.all_names is None:
            self.all_dynamic = True
        else:
            self.all_names.extend(listed)

    def _all_call(self, value: ast.expr) -> None:
        if not (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name)
            and value.func.value.id == "__all__"
            and len(value.args) == 1
        ):
            return
        method, arg = value.func.attr, value.args[0]
        if self.all_names is None:
            self.all_dynamic = True
        elif method == "extend":
            self._extend_all(arg)
        elif method in ("append", "remove") and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if method == "append":
                self.all_names.append(arg.value)
            elif arg.value in self.all_names:
                self.all_names.remove(arg.value)
        else:
            self.all_dynamic = True

    def _try(self, stmt: TryNode, state: State, ctx: _Context) -> State | None:
        body = self.block(stmt.body, dict(state), ctx)
        if body is not None and stmt.orelse:
            body = self.block(stmt.orelse, body, ctx)
        paths: list[State | None] = [body]
        for handler in stmt.handlers:
            start = dict(_merge([state, body]) or state)
            if handler.name:
                self._bind(start, handler.name, OpaqueBinding(ctx.qual + handler.name))
            paths.append(self.block(handler.body, start, ctx))
        after = _merge(paths)
        if stmt.finalbody:
            final = self.block(stmt.finalbody, dict(after if after is not None else state), ctx)
            return final if after is not None else None
        return after

    # -- classes and functions ----------------------------------------------------

    def _holds_class(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        end = node.end_lineno or node.lineno
        i = bisect.bisect_right(self.class_lines, node.lineno)
        return i < len(self.class_lines) and self.class_lines[i] <= end

    def _decorators(self, nodes: Sequence[ast.expr], state: State, ctx: _Context) -> tuple[Decorator, ...]:
        out: list[Decorator] = []
        for node in nodes:
            target = node.func if isinstance(node, ast.Call) else node
            out.append(
                Decorator(self._ref(target, state, ctx), isinstance(node, ast.Call), node.lineno, node.col_offset)
            )
        return tuple(out)

    def _def_summary(self, node: ast.FunctionDef | ast.AsyncFunctionDef, state: State, ctx: _Context) -> DefSummary:
        return DefSummary(
            node.name,
            node.lineno,
            node.col_offset,
            self._decorators(node.decorator_list, state, ctx),
            isinstance(node, ast.AsyncFunctionDef),
        )

    def _base(self, node: ast.expr, state: State, ctx: _Context) -> BaseExpr:
        ref = self._ref(node, state, ctx)
        if ref is not None:
            return ref
        if isinstance(node, ast.Call):
            call = self._call(node, state, ctx)
            if call is not None:
                return call
        return OpaqueBase(type(node).__name__.lower())

    def _class(self, node: ast.ClassDef, state: State, ctx: _Context) -> int:
        index = len(self.classes)
        self.classes.append(None)
        bases = tuple(self._base(b, state, ctx) for b in node.bases)
        decorators = self._decorators(node.decorator_list, state, ctx)
        qualname = ctx.qual + node.name
        build = _ClassBuild(index)
        metaclass = next((self._ref(k.value, state, ctx) for k in node.keywords if k.arg == "metaclass"), None)
        # A class body sees its own names, then the scopes around it, skipping enclosing class bodies.
        body_outer = (ctx.here, *ctx.outer) if ctx.here is not None else ctx.outer
        body_state = self.block(node.body, {}, _context(None, body_outer, qualname + ".", build)) or {}
        for stmt in node.body:
            self._instance_attrs(stmt, build.names)
        scope = {
            name: cands
            for name, cands in body_state.items()
            if any(c >= 0 and not isinstance(self.bindings[c], OpaqueBinding) for c in cands)
        }
        self.classes[index] = ClassSummary(
            node.name,
            qualname,
            node.lineno,
            node.col_offset,
            bases,
            frozenset(build.names),
            tuple(build.defs),
            scope,
            decorators,
            metaclass,
        )
        return index

    def _instance_attrs(self, stmt: ast.stmt, names: set[str]) -> None:
        """Collect ``self.x = ...`` targets of the methods in a class body (pyright's instance members)."""
        match stmt:
            case ast.FunctionDef(args=args, body=body) | ast.AsyncFunctionDef(args=args, body=body):
                params = args.posonlyargs or args.args
                if params:
                    _SelfAttrs(params[0].arg, names).stmts(body)
            case (
                ast.If(body=body, orelse=orelse)
                | ast.For(body=body, orelse=orelse)
                | ast.AsyncFor(body=body, orelse=orelse)
                | ast.While(body=body, orelse=orelse)
            ):
                self._instance_attrs_of((*body, *orelse), names)
            case ast.With(body=body) | ast.AsyncWith(body=body):
                self._instance_attrs_of(body, names)
            case ast.Try() | ast.TryStar():
                self._instance_attrs_of((*stmt.body, *stmt.orelse, *stmt.finalbody), names)
                for handler in stmt.handlers:
                    self._instance_attrs_of(handler.body, names)
            case _:
                pass

    def _instance_attrs_of(self, stmts: Sequence[ast.stmt], names: set[str]) -> None:
        for inner in stmts:
            self._instance_attrs(inner, names)

    def function_body(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, outer: tuple[_ScopeRef, ...], qual: str, owner: int | None
    ) -> None:
        """Walk a function body that holds a class statement, after its enclosing scopes.

        In a classmethod of class ``owner`` the first parameter is that class (``cls``).
        """
        here = _ScopeRef({})
        args = node.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        params.extend(extra for extra in (args.vararg, args.kwarg) if extra is not None)
        for i, arg in enumerate(params):
            binding: Binding = ClassBinding(owner) if owner is not None and i == 0 else OpaqueBinding(qual + arg.arg)
            self._bind(here.state, arg.arg, binding)
        final = self.block(node.body, here.state, _context(here, outer, qual, None))
        if final is not None:
            here.state = final


class _SelfAttrs:
    """Finds the attributes a method assigns on its first parameter."""

    def __init__(self, param: str, names: set[str]) -> None:
        self.param = param
        self.names = names

    def target(self, node: ast.expr) -> None:
        """Record ``param.attr`` targets, also inside tuple and starred targets."""
        match node:
            case ast.Attribute(value=ast.Name(id=owner), attr=attr) if owner == self.param:
                self.names.add(attr)
            case ast.Tuple(elts=elts) | ast.List(elts=elts):
                for elt in elts:
                    self.target(elt)
            case ast.Starred(value=value):
                self.target(value)
            case _:
                pass

    def stmts(self, body: Sequence[ast.stmt]) -> None:
        """Walk statements, not entering nested functions or classes."""
        for stmt in body:
            match stmt:
                case ast.Assign(targets=targets):
                    for target in targets:
                        self.target(target)
                case ast.AnnAssign(target=target) | ast.AugAssign(target=target):
                    self.target(target)
                case ast.If(body=inner, orelse=orelse) | ast.While(body=inner, orelse=orelse):
                    self.stmts(inner)
                    self.stmts(orelse)
                case (
                    ast.For(target=target, body=inner, orelse=orelse)
                    | ast.AsyncFor(target=target, body=inner, orelse=orelse)
                ):
                    self.target(target)
                    self.stmts(inner)
                    self.stmts(orelse)
                case ast.With(items=items, body=inner) | ast.AsyncWith(items=items, body=inner):
                    for item in items:
                        if item.optional_vars is not None:
                            self.target(item.optional_vars)
                    self.stmts(inner)
                case ast.Try() | ast.TryStar():
                    self.stmts(stmt.body)
                    for handler in stmt.handlers:
                        self.stmts(handler.body)
                    self.stmts(stmt.orelse)
                    self.stmts(stmt.finalbody)
                case ast.Match(cases=cases):
                    for case in cases:
                        self.stmts(case.body)
                case _:
                    pass


def summary_of_error(path: str, module: str, is_package: bool, lines: int, error: SyntaxProblem) -> ModuleSummary:
    """The summary of a module that does not parse: no bindings, no classes, the error."""
    return ModuleSummary(path, module, is_package, path.endswith(".pyi"), lines, error, (), {}, (), None, ())


def summarize_source(data: bytes, path: str, module: str, is_package: bool, target: Target) -> ModuleSummary:
    """Parse ``data`` (the bytes of ``path``, module ``module``) and summarize it."""
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    try:
        tree = compile(data, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return summary_of_error(
            path, module, is_package, lines, SyntaxProblem(exc.lineno or 1, exc.offset or 1, exc.msg)
        )
    except (ValueError, UnicodeDecodeError) as exc:
        return summary_of_error(path, module, is_package, lines, SyntaxProblem(1, 1, str(exc)))
    assert isinstance(tree, ast.Module)
    class_lines: list[int] = []
    line = 1
    last = 0
    for match in _CLASS_KEYWORD.finditer(data):
        start = match.start()
        line_start = data.rfind(b"\n", 0, start) + 1
        if data[line_start:start].strip(b" \t"):
            continue
        line += data.count(b"\n", last, start)
        last = start
        class_lines.append(line)
    walker = _Walker(module, is_package, target, class_lines)
    here = _ScopeRef({})
    final = walker.block(tree.body, here.state, _context(here, (), "", None))
    if final is not None:
        here.state = final
    done = 0
    while done < len(walker.deferred):
        node, outer, qual, owner = walker.deferred[done]
        done += 1
        walker.function_body(node, outer, qual, owner)
    classes = tuple(c for c in walker.classes if c is not None)
    all_names = None if walker.all_dynamic or walker.all_names is None else tuple(walker.all_names)
    return ModuleSummary(
        path,
        module,
        is_package,
        path.endswith(".pyi"),
        lines,
        None,
        tuple(walker.bindings),
        here.state,
        tuple(walker.stars),
        all_names,
        classes,
    )
