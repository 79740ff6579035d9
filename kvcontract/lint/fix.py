"""``--fix``: add ``@override`` (and its import) and drop redundant ``list()``/``tuple()`` copies.

Edits are line insertions and in-line replacements on the original text, so formatting
and comments stay as they were. Fixing runs until no fixable finding is left, so a
second run changes nothing.
"""

from __future__ import annotations

import ast
import io
import os
import sys
import tokenize
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from kvcontract.lint.finding import AddOverride, Finding, Unwrap
from kvcontract.lint.runner import LintResult, LintSettings, lint_files

__all__ = ["FixOutcome", "decode_source", "fix_files", "fix_source", "import_line_index"]


def decode_source(data: bytes) -> tuple[str, str]:
    """The text of a Python file and its encoding (from its coding cookie or BOM)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding), encoding


def _newline(lines: Sequence[str]) -> str:
    for line in lines:
        if line.endswith("\r\n"):
            return "\r\n"
        if line.endswith("\n"):
            return "\n"
    return "\n"


def import_line_index(text: str, lines: Sequence[str]) -> int:
    """The 0-based line index before which a new import goes: after the module's leading
    imports, else after its docstring, else after its leading comments."""
    tree = ast.parse(text)
    body = tree.body
    position = 0
    start = 0
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        position = body[0].end_lineno or body[0].lineno
        start = 1
    found_import = False
    for stmt in body[start:]:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            position = stmt.end_lineno or stmt.lineno
            found_import = True
        else:
            break
    if position == 0 and not found_import:
        while position < len(lines) and lines[position].lstrip().startswith("#"):
            position += 1
    return position


def _section(module: str) -> int:
    """The section of an import, in the order isort and ruff keep them: ``__future__``, the standard
    library, then the others (third- and first-party together, and relative imports)."""
    if module == "__future__":
        return 0
    return 1 if module.split(".")[0] in sys.stdlib_module_names else 2


def _sort_key(stmt: ast.Import | ast.ImportFrom) -> tuple[int, bool, str]:
    """Section, then plain ``import`` lines before ``from`` lines, then the module's name."""
    if isinstance(stmt, ast.ImportFrom):
        module = stmt.module or ""
        return (2 if stmt.level else _section(module)), True, module.lower()
    return _section(stmt.names[0].name), False, stmt.names[0].name.lower()


def sorted_import_position(text: str, lines: Sequence[str], module: str) -> tuple[int, str, str]:
    """Where ``from module import ...`` goes so that the module's leading imports stay sorted:
    the 0-based line index, and the blank lines to put before and after it.

    It joins the first blank-line-separated block of its section at its sorted place, or starts
    a block of its own between the sections before and after it; a module with no leading
    import takes :func:`import_line_index`.
    """
    body = ast.parse(text).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    blocks: list[list[ast.Import | ast.ImportFrom]] = []
    for stmt in body:
        if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
            break
        if blocks and stmt.lineno == (blocks[-1][-1].end_lineno or blocks[-1][-1].lineno) + 1:
            blocks[-1].append(stmt)
        else:
            blocks.append([stmt])
    if not blocks:
        return import_line_index(text, lines), "", ""
    key = (_section(module), True, module.lower())
    for block in blocks:
        if max(_sort_key(stmt)[0] for stmt in block) == key[0]:
            later = next((stmt for stmt in block if _sort_key(stmt) > key), None)
            if later is not None:
                return later.lineno - 1, "", ""
            return block[-1].end_lineno or block[-1].lineno, "", ""
    before = [block for block in blocks if max(_sort_key(stmt)[0] for stmt in block) < key[0]]
    if not before:
        return blocks[0][0].lineno - 1, "", "\n"
    last = before[-1][-1]
    return last.end_lineno or last.lineno, "\n", ""


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _import_statement(module: str, name: str) -> str:
    return f"from {module} import override" + ("" if name == "override" else f" as {name}")


def fix_source(text: str, findings: Iterable[Finding]) -> tuple[str, int]:
    """Apply the fixes of ``findings`` (all of one file) to ``text``; the new text and the
    number of findings fixed."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += _newline(lines)
        trailing_added = True
    else:
        trailing_added = False
    newline = _newline(lines)
    edits: list[tuple[int, int, Finding]] = []
    imports: dict[str, str] = {}
    for f in findings:
        if isinstance(f.fix, AddOverride):
            edits.append((f.fix.before_line, -1, f))
            if f.fix.import_from is not None:
                imports[f.fix.name] = f.fix.import_from
        elif isinstance(f.fix, Unwrap):
            edits.append((f.fix.line, f.fix.col, f))
    count = 0
    seen: set[tuple[int, int]] = set()
    for line_no, col, f in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        if (line_no, col) in seen:
            continue
        seen.add((line_no, col))
        fix = f.fix
        if isinstance(fix, AddOverride):
            def_line = lines[fix.def_line - 1]
            lines.insert(fix.before_line - 1, f"{_indent(def_line)}@{fix.name}{newline}")
            count += 1
        elif isinstance(fix, Unwrap) and fix.line == fix.end_line:
            raw = lines[fix.line - 1].encode("utf-8")
            replaced = raw[: fix.col] + fix.replacement.encode("utf-8") + raw[fix.end_col :]
            lines[fix.line - 1] = replaced.decode("utf-8")
            count += 1
        elif isinstance(fix, Unwrap):
            first = lines[fix.line - 1].encode("utf-8")
            last = lines[fix.end_line - 1].encode("utf-8")
            joined = first[: fix.col] + fix.replacement.encode("utf-8") + last[fix.end_col :]
            lines[fix.line - 1 : fix.end_line] = [joined.decode("utf-8")]
            count += 1
    for name, module in sorted(imports.items()):
        index, before, after = sorted_import_position("".join(lines), lines, module)
        statement = _import_statement(module, name) + newline
        lines[index:index] = [newline] * len(before) + [statement] + [newline] * len(after)
    result = "".join(lines)
    if trailing_added:
        result = result[: -len(newline)]
    return result, count


class FixOutcome(NamedTuple):
    """What ``--fix`` did: original and fixed text of each changed file, and what is left."""

    originals: dict[str, str]
    fixed: dict[str, str]
    encodings: dict[str, str]
    applied: int
    result: LintResult


def fix_files(paths: Sequence[str], settings: LintSettings, max_passes: int = 8) -> FixOutcome:
    """Lint ``paths`` and fix what can be fixed, in memory, until nothing fixable is left."""
    absolute = [os.path.abspath(p) for p in paths]
    result = lint_files(absolute, settings)
    originals: dict[str, str] = {}
    texts: dict[str, str] = {}
    encodings: dict[str, str] = {}
    sources: dict[str, bytes] = {}
    total = 0
    for _ in range(max_passes):
        by_file: dict[str, list[Finding]] = {}
        for f in result.findings:
            if f.fix is not None:
                by_file.setdefault(f.path, []).append(f)
        changed = False
        for path, found in by_file.items():
            if path not in texts:
                with open(path, "rb") as handle:
                    originals[path], encodings[path] = decode_source(handle.read())
                texts[path] = originals[path]
            new, count = fix_source(texts[path], found)
            if count and new != texts[path] and _parses(new):
                texts[path] = new
                sources[path] = new.encode(encodings[path])
                total += count
                changed = True
        if not changed:
            break
        result = lint_files(absolute, settings, sources)
    fixed = {p: t for p, t in texts.items() if t != originals[p]}
    return FixOutcome({p: originals[p] for p in fixed}, fixed, encodings, total, result)


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True
