"""Property-based tests against reference models: CPython's own MRO, Python's tuple comparison,
a plain selection model, and the fixer's idempotence on generated classes."""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcontract.lint.fix import fix_files
from kvcontract.lint.parse import parse_file
from kvcontract.lint.resolve import ClassInfo
from kvcontract.lint.runner import code_enabled, make_resolver
from kvcontract.lint.static_conditions import Target, static_truth
from tests.lint.support import TARGET, lint_tree
from tests.lint.support import settings as lint_settings

# Each class i may inherit from classes with a smaller index: a random DAG.
hierarchies = st.integers(min_value=1, max_value=7).flatmap(
    lambda n: st.tuples(
        *(st.lists(st.integers(0, max(i - 1, 0)), max_size=3, unique=True) if i else st.just([]) for i in range(n))
    )
)


def _runtime_mro(bases: tuple[list[int], ...]) -> list[list[str]] | None:
    classes: list[type] = []
    for i, parents in enumerate(bases):
        try:
            classes.append(type(f"C{i}", tuple(classes[p] for p in parents) or (object,), {}))
        except TypeError:
            return None
    return [[c.__name__ for c in cls.__mro__] for cls in classes]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hierarchies)
def test_mro_matches_cpython(bases: tuple[list[int], ...]) -> None:
    expected = _runtime_mro(bases)
    source = "".join(
        f"class C{i}({', '.join(f'C{p}' for p in parents)}):\n    pass\n" for i, parents in enumerate(bases)
    )
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "h.py"
        path.write_text(source)
        parsed = parse_file(str(path), TARGET)
        resolver = make_resolver([parsed], lint_settings(Path(directory)))
        got: list[list[str]] = []
        for index in range(len(bases)):
            mro = resolver.mro(resolver.source_class(parsed.summary, index))
            got.append([e.name if isinstance(e, ClassInfo) else "?" for e in mro])
    if expected is not None:
        assert got == expected


versions = st.tuples(st.integers(2, 4), st.integers(0, 15))
operators = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])


@given(versions, versions, operators, st.booleans())
def test_version_conditions_match_python(
    target: tuple[int, int], wanted: tuple[int, int], op: str, negate: bool
) -> None:
    text = f"{'not ' if negate else ''}sys.version_info {op} {wanted!r}"
    node = ast.parse(text, mode="eval").body
    expected = eval(f"{'not ' if negate else ''}{target!r} {op} {wanted!r}")
    assert static_truth(node, Target(target, "linux"), {"sys"}, {"typing"}, {"os"}) is expected


codes = st.sampled_from(["KVC000", "KVC001", "KVC002", "KVC003", "KVC004", "KVC005", "KVC006", "KVC007"])
prefixes = st.lists(st.sampled_from(["KVC", "KVC0", "KVC00", "KVC001", "KVC002", "KVC007"]), max_size=3)


@given(codes, prefixes, prefixes)
def test_selection_matches_the_longest_prefix_model(code: str, select: list[str], ignore: list[str]) -> None:
    def longest(items: list[str]) -> int:
        return max((len(p) for p in items if code.startswith(p)), default=-1)

    expected = longest(select) >= 0 and longest(select) > longest(ignore)
    assert code_enabled(code, select, ignore) is expected


methods = st.sampled_from(["__repr__", "__str__", "keys", "get", "copy", "fresh_name"])
decorations = st.sampled_from(
    ["", "@staticmethod\n", "@classmethod\n", "@property\n", "@traced\n", "@classmethod\n@traced\n"]
)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(methods, decorations), min_size=1, max_size=5, unique_by=lambda m: m[0]))
def test_fix_is_idempotent_and_leaves_no_missing_override(members: list[tuple[str, str]]) -> None:
    body = ""
    for name, decoration in members:
        for line in decoration.splitlines():
            body += f"    {line}\n"
        first = "" if decoration.startswith("@staticmethod") else ("cls" if "classmethod" in decoration else "self")
        body += f"    def {name}({first}):\n        return None\n"
    source = "def traced(f):\n    return f\n\n\nclass D(dict):\n" + body
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        path = root / "gen.py"
        path.write_text(source)
        once = fix_files([str(path)], lint_settings(root))
        fixed = once.fixed.get(str(path), source)
        path.write_text(fixed)
        twice = fix_files([str(path)], lint_settings(root))
        assert twice.fixed == {}
        compile(fixed, str(path), "exec")
        assert not [f for f in lint_tree(root) if f.code == "KVC001"]
