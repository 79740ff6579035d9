"""Running the rules over a set of files: parse (in parallel), resolve, check, filter.

This is the library entry point behind the command line, the flake8 plugin and
``kvcontract lint``: :func:`lint_files` takes file paths and settings and returns findings.
"""

from __future__ import annotations

import fnmatch
import gc
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from kvcontract.lint.contract_rules import ContractChecker
from kvcontract.lint.finding import Finding
from kvcontract.lint.modules import ModuleFinder, ModuleLocation, default_roots
from kvcontract.lint.override_rules import OverrideSettings, override_findings
from kvcontract.lint.parse import ParsedFile, default_jobs, parse_files, parse_location, parse_locations
from kvcontract.lint.resolve import Resolver
from kvcontract.lint.static_conditions import Target
from kvcontract.lint.summary import FromBinding, ModuleBinding, ModuleSummary, Ref

__all__ = ["LintResult", "LintSettings", "code_enabled", "lint_files", "make_resolver"]


def _current_target() -> Target:
    return Target((sys.version_info.major, sys.version_info.minor), sys.platform)


@dataclass(frozen=True)
class LintSettings:
    """What to check and how: rule selection, roots, contract bases, target Python."""

    select: tuple[str, ...] = ("KVC",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    extra_roots: tuple[str, ...] = ()
    contract_bases: tuple[str, ...] = ()
    exempt_dunders: bool = False
    target: Target = field(default_factory=_current_target)
    jobs: int = field(default_factory=default_jobs)
    project_root: str = field(default_factory=os.getcwd)

    @property
    def import_from(self) -> str:
        """Where ``--fix`` imports ``override`` from: ``typing`` from Python 3.12 on."""
        return "typing" if self.target.version >= (3, 12) else "typing_extensions"


@dataclass
class LintResult:
    """Findings (sorted, filtered) and the size of what was checked."""

    findings: list[Finding]
    files: int
    lines: int
    parsed: list[ParsedFile]


def _longest(code: str, prefixes: Iterable[str]) -> int:
    return max((len(p) for p in prefixes if code.startswith(p)), default=-1)


def code_enabled(code: str, select: Iterable[str], ignore: Iterable[str]) -> bool:
    """Whether ``code`` is on: the longest matching prefix of ``select``/``ignore`` decides."""
    selected = _longest(code, select)
    return selected >= 0 and selected > _longest(code, ignore)


def _ignored_here(path: str, code: str, settings: LintSettings) -> bool:
    if not settings.per_file_ignores:
        return False
    rel = os.path.relpath(path, settings.project_root).replace(os.sep, "/")
    base = os.path.basename(path)
    for pattern, codes in settings.per_file_ignores:
        matches = fnmatch.fnmatch(rel, pattern) or ("/" not in pattern and fnmatch.fnmatch(base, pattern))
        if matches and _longest(code, codes) >= 0:
            return True
    return False


def _suppressed(finding: Finding, noqa: dict[int, frozenset[str] | None]) -> bool:
    if finding.line not in noqa:
        return False
    codes = noqa[finding.line]
    return codes is None or any(finding.code.startswith(c) for c in codes)


def make_resolver(parsed: Sequence[ParsedFile], settings: LintSettings) -> Resolver:
    """A resolver over the checked files, their roots, the project root, the configured roots
    and ``sys.path``, in that order."""
    roots: list[str] = []
    for p in parsed:
        if p.root not in roots:
            roots.append(p.root)
    project = os.path.abspath(settings.project_root)
    if project not in roots:
        roots.append(project)
    for root in default_roots(os.path.join(settings.project_root, r) for r in settings.extra_roots):
        if root not in roots:
            roots.append(root)
    target = settings.target

    def parse(loc: ModuleLocation) -> ModuleSummary | None:
        return parse_location(loc, target)

    return Resolver(ModuleFinder(roots), [p.summary for p in parsed], parse)


def _imported_modules(summary: ModuleSummary) -> Iterator[str]:
    """Modules that the bases and decorators of ``summary``'s classes name directly."""
    yield from summary.stars
    for cls in summary.classes:
        refs = [b for b in cls.bases if isinstance(b, Ref)]
        refs.extend(deco.ref for d in cls.defs for deco in d.decorators if deco.ref is not None)
        for ref in refs:
            for cand in ref.cands:
                binding = summary.bindings[cand] if cand >= 0 else None
                if isinstance(binding, FromBinding):
                    yield binding.module
                    yield f"{binding.module}.{binding.name}"
                elif isinstance(binding, ModuleBinding):
                    name = binding.module
                    yield name
                    for attr in ref.attrs:
                        name = f"{name}.{attr}"
                        yield name


def _prefetch(resolver: Resolver, parsed: Sequence[ParsedFile], settings: LintSettings) -> None:
    """Parse, in parallel, the modules outside the checked files that class bases name directly
    (the resolver would otherwise parse them one by one)."""
    if settings.jobs <= 1 or len(parsed) < 32:
        return
    wanted: dict[str, None] = {}
    for p in parsed:
        wanted.update(dict.fromkeys(_imported_modules(p.summary)))
    locations: list[ModuleLocation] = []
    for name in wanted:
        if name in resolver.by_name or name in resolver.modules:
            continue
        loc = resolver.finder.find(name)
        if loc is not None and loc.kind in ("source", "stub") and loc.path not in resolver.by_path:
            locations.append(loc)
    for loc, summary in zip(locations, parse_locations(locations, settings.target, settings.jobs)):
        resolver.modules[loc.name] = summary


def lint_files(paths: Sequence[str], settings: LintSettings, sources: Mapping[str, bytes] | None = None) -> LintResult:
    """Check ``paths`` (Python files) and return the findings that are enabled and not suppressed.

    ``sources`` maps absolute paths to their text when it should not be read from disk.
    """
    # Summaries and syntax trees hold no reference cycles; the cyclic collector would only
    # rescan them over and over, so it is paused for the run.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _lint(paths, settings, sources)
    finally:
        if paused:
            gc.enable()


def _lint(paths: Sequence[str], settings: LintSettings, sources: Mapping[str, bytes] | None) -> LintResult:
    parsed = parse_files([os.path.abspath(p) for p in paths], settings.target, settings.jobs, sources)
    resolver = make_resolver(parsed, settings)
    _prefetch(resolver, parsed, settings)
    checked = {p.summary.path for p in parsed}
    override = OverrideSettings(exempt_dunders=settings.exempt_dunders, import_from=settings.import_from)
    contracts = ContractChecker(resolver, settings.contract_bases, sources)
    findings: list[Finding] = []
    for p in parsed:
        summary = p.summary
        raw: list[Finding] = []
        if summary.error is not None:
            raw.append(
                Finding(
                    summary.path,
                    summary.error.line,
                    summary.error.col,
                    "KVC000",
                    f"syntax error: {summary.error.message}",
                )
            )
        else:
            raw.extend(override_findings(resolver, summary, override, checked))
            raw.extend(contracts.findings(summary))
        for f in raw:
            if not code_enabled(f.code, settings.select, settings.ignore):
                continue
            if _suppressed(f, p.noqa) or _ignored_here(f.path, f.code, settings):
                continue
            findings.append(f)
    findings.sort(key=Finding.sort_key)
    return LintResult(findings, len(parsed), sum(p.summary.lines for p in parsed), parsed)
