"""Helpers for the kvcontract-lint tests: write module trees, lint them, summarize findings."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path

from kvcontract.lint.finding import Finding
from kvcontract.lint.runner import LintSettings, lint_files
from kvcontract.lint.static_conditions import Target

TARGET = Target((3, 11), "linux")


def write_tree(root: Path, files: Mapping[str, str]) -> Path:
    """Write ``files`` (relative path -> source, dedented) under ``root``; returns ``root``."""
    for rel, source in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    return root


def settings(
    root: Path,
    *,
    select: tuple[str, ...] = ("KVC",),
    target: Target = TARGET,
    exempt_dunders: bool = False,
    extra_roots: tuple[str, ...] = (),
    contract_bases: tuple[str, ...] = (),
) -> LintSettings:
    """Settings for a test run: one process, Python 3.11 on Linux unless told, rooted at ``root``."""
    return LintSettings(
        select=select,
        target=target,
        exempt_dunders=exempt_dunders,
        extra_roots=extra_roots,
        contract_bases=contract_bases,
        jobs=1,
        project_root=str(root),
    )


def lint_tree(
    root: Path,
    files: Iterable[str] | None = None,
    *,
    select: tuple[str, ...] = ("KVC",),
    target: Target = TARGET,
    exempt_dunders: bool = False,
    extra_roots: tuple[str, ...] = (),
    contract_bases: tuple[str, ...] = (),
) -> list[Finding]:
    """Lint ``files`` (relative to ``root``; default: every .py file under it)."""
    paths = [str(root / f) for f in files] if files is not None else sorted(str(p) for p in root.rglob("*.py"))
    chosen = settings(
        root,
        select=select,
        target=target,
        exempt_dunders=exempt_dunders,
        extra_roots=extra_roots,
        contract_bases=contract_bases,
    )
    return lint_files(paths, chosen).findings


def found(findings: Iterable[Finding], root: Path, code: str | None = None) -> set[tuple[str, int, str]]:
    """(relative path, line, code) of each finding, optionally of one code only."""
    return {
        (Path(f.path).relative_to(root).as_posix(), f.line, f.code) for f in findings if code is None or f.code == code
    }
