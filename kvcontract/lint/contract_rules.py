"""KVC003 to KVC006: overrides of kvcontract contract methods, checked against the contract's source.

A contract is a Protocol class that inherits ``kvcontract.contracts.base.Contract`` (or
a class named in ``contract-bases``). The contract method's signature is read from its
parsed source, never hard-coded, so the rules follow the contracts as they change.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence

from kvcontract.lint.annotations import ClassType, is_subtype, render, type_of
from kvcontract.lint.body_rules import iterable_reuses, redundant_materializations
from kvcontract.lint.decorators import DecoratorKind, effective_def
from kvcontract.lint.finding import Finding, Unwrap
from kvcontract.lint.override_rules import EXEMPT
from kvcontract.lint.resolve import ClassInfo, Resolver, Unknown
from kvcontract.lint.summary import DefSummary, ModuleSummary

__all__ = ["CONTRACT_ROOT", "ContractChecker"]

CONTRACT_ROOT = "kvcontract.contracts.base.Contract"
_SEQUENCE = frozenset({"_collections_abc.Sequence", "collections.abc.Sequence"})
_ITERABLE = frozenset({"_collections_abc.Iterable", "collections.abc.Iterable"})

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def _positional(node: FunctionNode) -> list[ast.arg]:
    return [*node.args.posonlyargs, *node.args.args]


def _defaults(node: FunctionNode) -> dict[str, bool]:
    """Whether each parameter has a default."""
    positional = _positional(node)
    first_default = len(positional) - len(node.args.defaults)
    out = {a.arg: i >= first_default for i, a in enumerate(positional)}
    for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults):
        out[a.arg] = d is not None
    return out


def _find_def(tree: ast.Module, line: int) -> FunctionNode | None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == line:
            return node
    return None


def _class_def(tree: ast.Module, line: int) -> ast.ClassDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.lineno == line:
            return node
    return None


class ContractChecker:
    """Finds KVC003-KVC006 in classes that implement contracts."""

    def __init__(
        self,
        resolver: Resolver,
        extra_bases: Sequence[str] = (),
        sources: Mapping[str, bytes] | None = None,
    ) -> None:
        self.resolver = resolver
        self.extra: frozenset[str] = frozenset(extra_bases)
        self.sources: Mapping[str, bytes] = sources or {}
        self._contract: dict[int, bool] = {}
        self._trees: dict[str, ast.Module | None] = {}

    def tree(self, path: str) -> ast.Module | None:
        """The parsed source of ``path`` (cached), from ``sources`` when it is there."""
        if path not in self._trees:
            try:
                data = self.sources.get(path)
                if data is None:
                    with open(path, "rb") as handle:
                        data = handle.read()
                self._trees[path] = ast.parse(data, path)
            except (OSError, SyntaxError, ValueError):
                self._trees[path] = None
        return self._trees[path]

    def is_contract(self, info: ClassInfo) -> bool:
        """Whether ``info`` is a contract: a configured base, or a Protocol inheriting ``Contract``."""
        cached = self._contract.get(id(info))
        if cached is not None:
            return cached
        result = info.key in self.extra
        if not result and info.key != CONTRACT_ROOT and info.source is not None:
            bases = self.resolver.bases(info)
            protocol = any(isinstance(b, ClassInfo) and b.key == "typing.Protocol" for b in bases)
            result = protocol and any(
                isinstance(e, ClassInfo) and e.key == CONTRACT_ROOT for e in self.resolver.mro(info)[1:]
            )
        self._contract[id(info)] = result
        return result

    def findings(self, summary: ModuleSummary) -> Iterator[Finding]:
        """KVC003-KVC006 findings of the contract implementations in one checked module, and
        KVC001 for contract methods they take from plain mixins."""
        yield from self._signature_findings(summary)
        yield from self.mixin_findings(summary)

    def _signature_findings(self, summary: ModuleSummary) -> Iterator[Finding]:
        if not self.extra and self.resolver.modules.get("kvcontract.contracts.base") is None:
            return
        for index, cls in enumerate(summary.classes):
            if not cls.defs:
                continue
            info = self.resolver.source_class(summary, index)
            if self.is_contract(info):
                continue
            contracts = [e for e in self.resolver.mro(info)[1:] if isinstance(e, ClassInfo) and self.is_contract(e)]
            if not contracts:
                continue
            groups: dict[str, list[DefSummary]] = {}
            for d in cls.defs:
                groups.setdefault(d.name, []).append(d)
            for name, defs in groups.items():
                contract = next(
                    (k for k in contracts if k.source is not None and any(d.name == name for d in k.source.defs)), None
                )
                if contract is None:
                    continue
                effective = effective_def(self.resolver, summary, defs)
                if (
                    effective is None
                    or DecoratorKind.DESCRIPTOR in effective.kinds
                    or DecoratorKind.PROPERTY in effective.kinds
                ):
                    continue
                yield from self._check_method(summary, contract, effective.definition)

    def mixin_findings(self, summary: ModuleSummary) -> Iterator[Finding]:
        """KVC001 for contract methods a class takes from a plain mixin that lacks ``@override``.

        The mixin inherits no contract, so no checker sees its method override anything; the
        override happens in the class that puts the mixin before a contract, so the finding is
        reported there (once: a subclass of that class is not reported again), as
        :mod:`kvcontract.enforce` raises there at run time.
        """
        if not self.extra and self.resolver.modules.get("kvcontract.contracts.base") is None:
            return
        for index, cls in enumerate(summary.classes):
            info = self.resolver.source_class(summary, index)
            if self.is_contract(info):
                continue
            mro = self.resolver.mro(info)
            contracts = [e for e in mro[1:] if isinstance(e, ClassInfo) and self.is_contract(e)]
            if not contracts:
                continue
            for name in sorted(self._contract_names(contracts)):
                if name in info.names or name in EXEMPT:
                    continue
                mixin = self._mixin_providing(mro, name)
                if mixin is None:
                    continue
                contract = next(
                    k for k in contracts if k.source is not None and any(d.name == name for d in k.source.defs)
                )
                yield Finding(
                    summary.path,
                    cls.line,
                    cls.col + 1,
                    "KVC001",
                    f"class {cls.name!r} takes {name!r} from mixin {mixin.key}, which overrides contract "
                    f"method {contract.name}.{name} without @override; decorate it there (and let the "
                    "mixin inherit the contract so type checkers see the base)",
                )

    def _contract_names(self, contracts: Sequence[ClassInfo]) -> set[str]:
        """The public method names the contracts define, as :mod:`kvcontract.enforce` wraps them."""
        return {
            d.name
            for k in contracts
            if k.source is not None
            for d in k.source.defs
            if not d.name.startswith("_") or (d.name.endswith("__") and d.name != "__init_subclass__")
        }

    def _mixin_providing(self, mro: Sequence[ClassInfo | Unknown], name: str) -> ClassInfo | None:
        """The plain mixin whose unmarked ``name`` the class's MRO meets first, if it is one.

        ``None`` when a class in between implements a contract (it was checked itself), when
        the provider is a contract class, or when it cannot be seen from source.
        """
        for entry in mro[1:]:
            if isinstance(entry, Unknown):
                return None
            if name not in entry.names:
                if any(isinstance(e, ClassInfo) and self.is_contract(e) for e in self.resolver.mro(entry)):
                    return None  # a contract implementation between: reported on its own class
                continue
            if (
                entry.source is None
                or entry.summary is None
                or any(
                    isinstance(e, ClassInfo) and (self.is_contract(e) or e.key == CONTRACT_ROOT)
                    for e in self.resolver.mro(entry)
                )
            ):
                return None
            defs = [d for d in entry.source.defs if d.name == name]
            if not defs:
                return None
            effective = effective_def(self.resolver, entry.summary, defs)
            return None if effective is None or effective.has_override else entry
        return None

    def _contract_node(self, contract: ClassInfo, name: str) -> FunctionNode | None:
        assert contract.summary is not None and contract.source is not None
        tree = self.tree(contract.summary.path)
        if tree is None:
            return None
        cls = _class_def(tree, contract.source.line)
        if cls is None:
            return None
        found: FunctionNode | None = None
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                found = stmt
        return found

    def _check_method(self, summary: ModuleSummary, contract: ClassInfo, d: DefSummary) -> Iterator[Finding]:
        tree = self.tree(summary.path)
        assert contract.summary is not None
        base = self._contract_node(contract, d.name)
        node = _find_def(tree, d.line) if tree is not None else None
        if base is None or node is None:
            return
        where = f"{contract.name}.{d.name}"
        yield from self._annotations(summary, node, where)
        yield from self._signature(summary, node, contract.summary, base, where)
        yield from self._body(summary, node, contract.summary, base, where)

    def _annotations(self, summary: ModuleSummary, node: FunctionNode, where: str) -> Iterator[Finding]:
        params = [*_positional(node)[1:], *node.args.kwonlyargs]
        params.extend(a for a in (node.args.vararg, node.args.kwarg) if a is not None)
        missing = [f"parameter {a.arg!r}" for a in params if a.annotation is None]
        if node.returns is None:
            missing.append("the return type")
        if missing:
            yield Finding(
                summary.path,
                node.lineno,
                node.col_offset + 1,
                "KVC006",
                f"override of contract method {where} lacks annotations for {', '.join(missing)}; "
                "copy them from the contract",
            )

    def _signature(
        self, summary: ModuleSummary, node: FunctionNode, base_summary: ModuleSummary, base: FunctionNode, where: str
    ) -> Iterator[Finding]:
        mine = _positional(node)[1:]
        theirs = _positional(base)[1:]
        posonly = {a.arg for a in base.args.posonlyargs}
        my_defaults, their_defaults = _defaults(node), _defaults(base)
        my_names = {a.arg: a for a in (*mine, *node.args.kwonlyargs)}
        has_varargs, has_kwargs = node.args.vararg is not None, node.args.kwarg is not None
        matched: dict[str, ast.arg] = {}
        for i, theirs_arg in enumerate(theirs):
            cname = theirs_arg.arg
            mine_arg = mine[i] if i < len(mine) else None
            if mine_arg is not None and (mine_arg.arg == cname or cname in posonly):
                matched[cname] = mine_arg
            elif mine_arg is not None:
                matched[cname] = mine_arg
                yield self._at(
                    summary,
                    mine_arg,
                    "KVC003",
                    f"parameter {i + 1} of contract method {where} is named {cname!r}, "
                    f"here {mine_arg.arg!r}: callers passing {cname}= break; rename it to {cname!r}",
                )
                continue
            elif cname in my_names:
                matched[cname] = my_names[cname]
            elif not (has_varargs and (has_kwargs or cname in posonly)):
                yield self._at(
                    summary,
                    node,
                    "KVC003",
                    f"parameter {cname!r} of contract method {where} is missing here; "
                    "accept it with the contract's name and type",
                )
                continue
            if cname in matched and their_defaults.get(cname) and not my_defaults.get(matched[cname].arg):
                yield self._at(
                    summary,
                    matched[cname],
                    "KVC003",
                    f"parameter {cname!r} has a default in contract method {where} "
                    "but not here; callers that omit it break: give it the same default",
                )
        for kw in base.args.kwonlyargs:
            if kw.arg in my_names:
                matched[kw.arg] = my_names[kw.arg]
            elif not has_kwargs:
                yield self._at(
                    summary, node, "KVC003", f"keyword parameter {kw.arg!r} of contract method {where} is missing here"
                )
        matched_names = {a.arg for a in matched.values()}
        for extra in (*mine, *node.args.kwonlyargs):
            if extra.arg not in matched_names and not my_defaults.get(extra.arg):
                yield self._at(
                    summary,
                    extra,
                    "KVC003",
                    f"parameter {extra.arg!r} is required here but not in contract method "
                    f"{where}; callers do not pass it: give it a default",
                )
        base_args = {a.arg: a for a in (*theirs, *base.args.kwonlyargs)}
        for cname, mine_arg in matched.items():
            expected = type_of(self.resolver, base_summary, base_args[cname].annotation)
            actual = type_of(self.resolver, summary, mine_arg.annotation)
            if mine_arg.annotation is not None and is_subtype(self.resolver, expected, actual) is False:
                yield self._at(
                    summary,
                    mine_arg,
                    "KVC003",
                    f"parameter {cname!r} is {render(expected)} in contract method {where} "
                    f"but narrowed to {render(actual)} here; accept at least {render(expected)}",
                )
        if node.returns is not None and base.returns is not None:
            expected = type_of(self.resolver, base_summary, base.returns)
            actual = type_of(self.resolver, summary, node.returns)
            if is_subtype(self.resolver, actual, expected) is False:
                yield self._at(
                    summary,
                    node.returns,
                    "KVC003",
                    f"return type {render(actual)} is wider than {render(expected)} "
                    f"of contract method {where}; return at most {render(expected)}",
                )

    def _body(
        self, summary: ModuleSummary, node: FunctionNode, base_summary: ModuleSummary, base: FunctionNode, where: str
    ) -> Iterator[Finding]:
        sequences: set[str] = set()
        iterables: set[str] = set()
        mine = _positional(node)[1:]
        for i, theirs_arg in enumerate(_positional(base)[1:]):
            if i >= len(mine):
                break
            kind = type_of(self.resolver, base_summary, theirs_arg.annotation)
            if isinstance(kind, ClassType):
                if kind.key in _SEQUENCE:
                    sequences.add(mine[i].arg)
                elif kind.key in _ITERABLE:
                    iterables.add(mine[i].arg)
        for m in redundant_materializations(node, frozenset(sequences)):
            call = m.call
            end_line = call.end_lineno or call.lineno
            end_col = call.end_col_offset if call.end_col_offset is not None else call.col_offset
            fix = Unwrap(call.lineno, call.col_offset, end_line, end_col, m.param)
            yield Finding(
                summary.path,
                call.lineno,
                call.col_offset + 1,
                "KVC004",
                f"{ast.unparse(call)} copies {m.param!r}, which contract method {where} types as Sequence: "
                f"it already supports len(), indexing and repeated iteration; use {m.param!r} directly",
                fix,
            )
        for r in iterable_reuses(node, frozenset(iterables)):
            yield Finding(
                summary.path,
                r.node.lineno,
                r.node.col_offset + 1,
                "KVC005",
                f"parameter {r.param!r} is {r.what}, but contract method {where} types it as Iterable, which may be "
                f"a one-shot iterator; take one pass, or make one copy first ({r.param} = list({r.param}))",
            )

    @staticmethod
    def _at(summary: ModuleSummary, node: ast.arg | ast.expr | FunctionNode, code: str, message: str) -> Finding:
        return Finding(summary.path, node.lineno, node.col_offset + 1, code, message)
