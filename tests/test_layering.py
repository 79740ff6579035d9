"""The layering of the package, drawn from its import statements with :mod:`ast`.

Contracts < components < assembly < the engine driver < simulation < planning and observation < commands and
integrations: a package imports its own layer or those below, never one above. Drawn here
rather than with import-linter because the rules also tell a module-level import from one
in a function body or under ``TYPE_CHECKING`` (the optional parts may be imported lazily),
and the circle check needs the graph itself, which :mod:`ast` gives in a few lines.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import pytest
from typing_extensions import override

PACKAGE = Path(__file__).resolve().parents[1] / "kvcontract"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"kvcontract", "kvcontract.contracts", "kvcontract.enforce", "kvcontract.extras"}),
    frozenset({"kvcontract.policies", "kvcontract.managers", "kvcontract.tiers", "kvcontract.transfer"}),
    frozenset({"kvcontract.config", "kvcontract.assembly", "kvcontract.metrics"}),
    frozenset({"kvcontract.engine_driver"}),
    frozenset({"kvcontract.sim"}),
    frozenset({"kvcontract.plan", "kvcontract.observe"}),
    frozenset(
        {
            "kvcontract.cli",
            "kvcontract.__main__",
            "kvcontract.arguments",
            "kvcontract.integrations",
            "kvcontract.lint",
            "kvcontract.testing",
        }
    ),
)
"""Each of kvcontract's packages (and top-level modules) in its layer, lowest first."""

OPTIONAL_PARTS = frozenset({"vllm", "sglang", "redis", "mooncake", "prometheus_client", "matplotlib"})
"""What the core may import only where it is used (a function body) or for the type checker."""

IMPORT_EFFECTS: Mapping[str, str] = {
    "kvcontract.__main__": "``python -m kvcontract`` runs the command",
    "kvcontract.policies.registry": "fills its own table with the built-in policies",
    "kvcontract.integrations.vllm": "refuses an unsupported vLLM release, naming the one found",
    "kvcontract.integrations.sglang": "refuses an unsupported SGLang release, naming the one found",
}
"""The only modules whose top level calls something, and what the call does (CONTRIBUTING.md)."""

Where = Literal["module", "function", "type_checking"]


@dataclass(frozen=True)
class Import:
    """One import statement's target, where it stands in its module, and its line."""

    importer: str
    target: str
    where: Where
    line: int


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    """The unit a layer holds: ``kvcontract.sim.trace`` is in ``kvcontract.sim``."""
    return ".".join(module.split(".")[:2])


class _Collector(ast.NodeVisitor):
    """Collects a module's imports, each marked with where it stands."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.where: Where = "module"
        self.found: list[Import] = []

    def _add(self, target: str, node: ast.stmt) -> None:
        self.found.append(Import(self.module, target, self.where, node.lineno))

    @override
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    @override
    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        target = node.module or ""
        if node.level:
            base = self.package.split(".")[: len(self.package.split(".")) - node.level + 1]
            target = ".".join([*base, target] if target else base)
        self._add(target, node)
        for alias in node.names:  # ``from kvcontract.sim import driver`` imports a module
            self._add(f"{target}.{alias.name}", node)

    @override
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_inside(node.body, "function")

    @override
    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_inside(node.body, "function")

    @override
    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" not in ast.unparse(node.test):
            self.generic_visit(node)
            return
        self._visit_inside(node.body, "type_checking")
        for statement in node.orelse:
            self.visit(statement)

    def _visit_inside(self, body: list[ast.stmt], where: Where) -> None:
        outer = self.where
        if outer == "module":
            self.where = where
        for statement in body:
            self.visit(statement)
        self.where = outer


@cache
def modules() -> Mapping[str, Path]:
    """Every module of the package by its dotted name."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


@cache
def imports() -> tuple[Import, ...]:
    """Every import statement of the package."""
    found: list[Import] = []
    for module, path in modules().items():
        collector = _Collector(module, path.name == "__init__.py")
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        found.extend(collector.found)
    return tuple(found)


def internal_imports() -> list[Import]:
    """The imports of kvcontract's own modules (``from X import name`` counted once, as X)."""
    known = modules()
    return [i for i in imports() if i.target in known and i.target != i.importer]


def layer_of(unit: str) -> int:
    return next(index for index, layer in enumerate(LAYERS) if unit in layer)


def test_every_package_has_a_layer() -> None:
    units = {package_of(module) for module in modules()}
    placed = frozenset[str]().union(*LAYERS)
    assert sorted(units - placed) == [], "add each new package to LAYERS in tests/test_layering.py"
    assert sorted(placed - units) == []


def test_no_package_imports_one_above_its_layer() -> None:
    upward = [
        f"{i.importer}:{i.line} imports {i.target} ({i.where})"
        for i in internal_imports()
        if layer_of(package_of(i.target)) > layer_of(package_of(i.importer))
    ]
    assert upward == []


def _circle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` as the path around it, or ``None`` if it has none."""
    state: dict[str, int] = {}  # 1 while on the current path, 2 when done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for successor in sorted(graph.get(node, ())):
            if state.get(successor) == 1:
                return [*path[path.index(successor) :], successor]
            if successor not in state and (found := visit(successor)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


@pytest.mark.parametrize("granularity", ["package", "module"])
def test_no_import_circle(granularity: str) -> None:
    """No circle between kvcontract's packages, nor between its modules, lazy imports included.

    ``contracts/base.py`` and ``enforce.py`` formed one (base imported the enforcement in a
    function body, and the enforcement imported base); now base imports the enforcement and the
    enforcement names the root without importing it.
    """
    unit = package_of if granularity == "package" else str
    graph: dict[str, set[str]] = {}
    for i in internal_imports():
        if unit(i.target) != unit(i.importer):
            graph.setdefault(unit(i.importer), set()).add(unit(i.target))
    assert _circle(graph) is None


def test_the_core_imports_no_optional_part_at_module_level() -> None:
    """vLLM, SGLang, Redis, Mooncake, prometheus-client and matplotlib: only in function bodies
    or for the type checker, below the integrations."""
    found = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in imports()
        if i.where == "module"
        and i.target.split(".")[0] in OPTIONAL_PARTS
        and package_of(i.importer) != "kvcontract.integrations"
    ]
    assert found == []


def test_no_engine_below_the_integrations() -> None:
    found = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in imports()
        if i.target.split(".")[0] in {"vllm", "sglang"} and package_of(i.importer) != "kvcontract.integrations"
    ]
    assert found == []


def test_the_lint_imports_nothing_of_the_runtime() -> None:
    """kvcontract-lint runs without the runtime's dependencies: it imports only itself and the
    argument parser, which imports only the standard library (its lazy ``__version__`` comes
    from the root package, loaded already as the lint's parent)."""
    found = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in internal_imports()
        if package_of(i.importer) == "kvcontract.lint"
        and package_of(i.target) not in {"kvcontract.lint", "kvcontract.arguments"}
    ]
    found += [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in internal_imports()
        if i.importer == "kvcontract.arguments" and (i.where == "module" or i.target != "kvcontract")
    ]
    assert found == []


def test_the_drawing_sees_the_imports_it_judges() -> None:
    """The graph is not empty by mistake: known imports of each kind are in it."""
    drawn = {(i.importer, i.target, i.where) for i in imports()}
    assert ("kvcontract.observe.whatif", "kvcontract.sim.observer", "module") in drawn
    assert ("kvcontract.contracts.base", "kvcontract.contracts.enforcement.classes", "module") in drawn
    assert any(i.target == "redis" and i.where == "function" for i in imports())
    assert any(i.target.startswith("matplotlib") and i.where == "type_checking" for i in imports())


def _top_level_calls(body: list[ast.stmt]) -> list[int]:
    """Lines of the calls a module makes as a statement when imported, under ``if``/``try``/``with`` too."""
    lines: list[int] = []
    for statement in body:
        match statement:
            case ast.Expr(value=ast.Call()):
                lines.append(statement.lineno)
            case ast.If() | ast.Try() | ast.With():
                for block in ("body", "orelse", "finalbody"):
                    lines += _top_level_calls(getattr(statement, block, []))
                for handler in getattr(statement, "handlers", []):
                    lines += _top_level_calls(handler.body)
            case _:
                pass
    return lines


def test_no_import_has_a_hidden_side_effect() -> None:
    """Importing a module defines names; it calls nothing for its effect, but in ``IMPORT_EFFECTS``.

    Importing ``kvcontract.contracts`` once registered the runtime enforcement with the
    contracts' root; the root calls the enforcement itself now.
    """
    found = {
        module: lines
        for module, path in modules().items()
        if (lines := _top_level_calls(ast.parse(path.read_text(encoding="utf-8")).body))
    }
    assert sorted(found) == sorted(IMPORT_EFFECTS)
