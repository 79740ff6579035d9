"""Speed and agreement of kvcontract-lint KVC001 against pyright's reportImplicitOverride.

Runs pyright on a source tree (default: the installed torch package) with only
``reportImplicitOverride`` enabled, runs ``kvcontract-lint --select KVC001`` on the same
tree, and prints both run times, the speed ratio, lines per second per core, the finding
counts and their agreement, with every difference grouped by reason and sampled.

Pyright takes minutes; its JSON output and run time are cached (``--pyright-cache``), so
later runs compare against the cached result. Usage::

    python tools/bench_lint.py [--tree DIR] [--pyright-cache FILE] [--rerun-pyright] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from kvcontract.lint.decorators import DecoratorKind, decorator_kinds
from kvcontract.lint.discover import discover
from kvcontract.lint.parse import ParsedFile, default_jobs, parse_files
from kvcontract.lint.resolve import ClassInfo, ModuleValue, Resolver, Unknown
from kvcontract.lint.runner import LintSettings, make_resolver
from kvcontract.lint.static_conditions import Target
from kvcontract.lint.summary import ClassSummary, DefSummary, ModuleSummary, Ref

DEFAULT_TREE = os.path.join(sysconfig.get_paths()["purelib"], "torch")
Key = tuple[str, int]


@dataclass
class PyrightRun:
    """Pyright's reportImplicitOverride findings (path, line) and its wall time."""

    seconds: float
    findings: set[Key]
    version: str


@dataclass
class LintRun:
    """kvcontract-lint's KVC001 findings, its best wall time and CPU time, and the tree size."""

    seconds: float
    cpu_seconds: float
    findings: set[Key]
    files: int
    lines: int


def _pyright_config(tree: str, directory: str) -> str:
    venv = sys.prefix
    config = {
        "include": [os.path.relpath(tree, directory)],
        "venvPath": os.path.dirname(venv),
        "venv": os.path.basename(venv),
        "pythonVersion": f"{sys.version_info.major}.{sys.version_info.minor}",
        "typeCheckingMode": "off",
        "reportImplicitOverride": "error",
    }
    path = os.path.join(directory, "pyrightconfig.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2)
    return path


def run_pyright(tree: str, cache: str, rerun: bool) -> PyrightRun:
    """Pyright's findings on ``tree``, from ``cache`` unless missing or ``rerun``."""
    if rerun or not os.path.exists(cache):
        pyright = shutil.which("pyright")
        if pyright is None:
            raise SystemExit("pyright is not installed: pip install pyright")
        with tempfile.TemporaryDirectory() as directory:
            config = _pyright_config(tree, directory)
            env = dict(os.environ)
            # The default Node heap (4 GiB) is too small for this tree: pyright thrashes.
            env.setdefault("NODE_OPTIONS", "--max-old-space-size=12288")
            start = time.perf_counter()
            done = subprocess.run([pyright, "--outputjson", "-p", config], capture_output=True, text=True, env=env)
            seconds = time.perf_counter() - start
        if not done.stdout.strip():
            raise SystemExit(f"pyright produced no output (exit {done.returncode}): {done.stderr[-2000:]}")
        with open(cache, "w", encoding="utf-8") as handle:
            json.dump({"seconds": seconds, "output": json.loads(done.stdout)}, handle)
    with open(cache, encoding="utf-8") as handle:
        cached = json.load(handle)
    output = cached["output"]
    findings = {
        (os.path.realpath(d["file"]), d["range"]["start"]["line"] + 1)
        for d in output["generalDiagnostics"]
        if d.get("rule") == "reportImplicitOverride" and d["file"].endswith(".py")
    }
    return PyrightRun(float(cached["seconds"]), findings, str(output.get("version", "?")))


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_lint(tree: str, runs: int, jobs: int) -> LintRun:
    """Time ``kvcontract-lint --select KVC001 --format json`` on ``tree`` (best of ``runs``).

    It runs from a scratch directory: run from inside the tree, ``python -m`` would put the
    tree first on ``sys.path`` (torch's ``types.py`` would shadow the standard library's).
    """
    best = float("inf")
    cpu = 0.0
    output = "[]"
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(runs):
            cpu_before = _cpu_children()
            start = time.perf_counter()
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "kvcontract.lint.cli",
                    "--select",
                    "KVC001",
                    "--format",
                    "json",
                    "--target-version",
                    f"{sys.version_info.major}.{sys.version_info.minor}",
                    "--jobs",
                    str(jobs),
                    tree,
                ],
                capture_output=True,
                text=True,
                cwd=scratch,
            )
            seconds = time.perf_counter() - start
            if done.returncode not in (0, 1):
                raise SystemExit(f"kvcontract-lint failed (exit {done.returncode}): {done.stderr[-2000:]}")
            if seconds < best:
                best, cpu, output = seconds, _cpu_children() - cpu_before, done.stdout
        items = json.loads(output)
        findings = {
            (os.path.realpath(os.path.join(scratch, i["path"])), int(i["line"]))
            for i in items
            if str(i["path"]).endswith(".py")
        }
    files, lines = _tree_size(tree)
    return LintRun(best, cpu, findings, files, lines)


def _tree_size(tree: str) -> tuple[int, int]:
    files = lines = 0
    for directory, dirs, names in os.walk(tree):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if name.endswith(".py"):
                files += 1
                with open(os.path.join(directory, name), "rb") as handle:
                    lines += handle.read().count(b"\n")
    return files, lines


_IGNORE_COMMENT = re.compile(r"#\s*(type|pyright):\s*ignore")
_PYRIGHT_KEEPS = {DecoratorKind.OVERRIDE, DecoratorKind.OVERLOAD, DecoratorKind.PROPERTY, DecoratorKind.ACCESSOR}
_KEEPING_DECORATORS = {"builtins.staticmethod", "builtins.classmethod", "abc.abstractmethod", "typing.final"}


class Explainer:
    """Says why one tool reports a method and the other does not, from kvcontract-lint's view of it."""

    def __init__(self, tree: str, jobs: int) -> None:
        version = (sys.version_info.major, sys.version_info.minor)
        self.settings = LintSettings(target=Target(version, sys.platform), jobs=jobs, project_root=tree)
        files = [f for f in discover([tree], root=tree) if f.endswith(".py")]
        parsed = parse_files(files, self.settings.target, jobs)
        self.files: dict[str, ParsedFile] = {os.path.realpath(p.summary.path): p for p in parsed}
        self.resolver: Resolver = make_resolver(parsed, self.settings)
        self._lines: dict[str, list[str]] = {}

    def source_line(self, path: str, line: int) -> str:
        """The stripped source line, for samples."""
        if path not in self._lines:
            with open(path, encoding="utf-8", errors="replace") as handle:
                self._lines[path] = handle.read().splitlines()
        lines = self._lines[path]
        return lines[line - 1].strip()[:100] if 0 < line <= len(lines) else ""

    def _method(self, summary: ModuleSummary, line: int) -> tuple[int, ClassSummary, list[DefSummary]] | None:
        for index, cls in enumerate(summary.classes):
            for d in cls.defs:
                if d.line == line:
                    return index, cls, [e for e in cls.defs if e.name == d.name]
        return None

    def _pyright_skips_decorator(self, summary: ModuleSummary, defs: list[DefSummary]) -> bool:
        """Whether a decorator of the method is one pyright may type as a non-function."""
        for d in defs:
            for deco, kind in zip(d.decorators, decorator_kinds(self.resolver, summary, d)):
                if kind in _PYRIGHT_KEEPS or deco.ref is None:
                    continue
                value = self.resolver.resolve_ref(summary, deco.ref)
                key = value.key if isinstance(value, ClassInfo) else getattr(value, "qualname", "")
                if key not in _KEEPING_DECORATORS:
                    return True
        return False

    def _through_submodule(self, summary: ModuleSummary, cls: ClassSummary) -> bool:
        """Whether a base is reached as ``pkg.sub.Name`` with ``sub`` bound only as a submodule."""
        for base in cls.bases:
            if not isinstance(base, Ref) or not base.attrs:
                continue
            value = self.resolver.resolve_name(summary, base.root, base.cands)
            for attr in base.attrs:
                if isinstance(value, ModuleValue):
                    found = self.resolver.module(value.name)
                    next_value = self.resolver.attr(value, attr)
                    # Not bound in the package, or bound by a stub's plain import (not re-exported).
                    hidden = isinstance(found, ModuleSummary) and (attr not in found.exports or found.is_stub)
                    if hidden and isinstance(next_value, ModuleValue):
                        return True
                value = self.resolver.attr(value, attr)
        return False

    def reason(self, path: str, line: int, side: str) -> str:
        """A category saying why only ``side`` ("pyright" or "lint") reports ``path:line``."""
        parsed = self.files.get(path)
        if parsed is None:
            return "file not checked by kvcontract-lint"
        summary = parsed.summary
        if summary.error is not None:
            return (
                f"file does not parse with the Python {sys.version_info.major}.{sys.version_info.minor} parser (KVC000)"
            )
        found = self._method(summary, line)
        if found is None:
            return "no method of a reachable class at this line for kvcontract-lint"
        index, cls, defs = found
        info = self.resolver.source_class(summary, index)
        member: ClassInfo | Unknown | None = None
        for base in self.resolver.bases(info):
            if isinstance(base, ClassInfo):
                member = self.resolver.find_member(base, defs[0].name)
                if member is not None:
                    break
        if side == "pyright":
            for base_expr, base in zip(cls.bases, self.resolver.bases(info)):
                if isinstance(base, Unknown) and isinstance(base_expr, Ref) and not base_expr.attrs:
                    binding = (
                        summary.bindings[base_expr.cands[0]] if base_expr.cands and base_expr.cands[0] >= 0 else None
                    )
                    if binding is not None and ".<locals>." in getattr(binding, "qualname", ""):
                        return "base is a local variable or parameter whose class pyright infers by narrowing (isinstance/issubclass); the lint reports KVC007"
            if isinstance(member, Unknown):
                return "kvcontract-lint cannot resolve a base in the MRO (KVC007)"
            return "kvcontract-lint finds no base that defines the name"
        if _IGNORE_COMMENT.search(self.source_line(path, line)):
            return "the line carries a '# type: ignore' or '# pyright: ignore' comment: pyright drops every diagnostic on it"
        if self._pyright_skips_decorator(summary, defs):
            return (
                "decorated with a decorator pyright types as a non-function (functools.cached_property, lru_cache, "
                "contextmanager, a class used as decorator, a wrapper without the original signature): pyright "
                "skips such methods, the lint counts them"
            )
        if self._through_submodule(summary, cls):
            return (
                "base named through 'pkg.sub' attribute access: pyright resolves a submodule attribute only when that "
                "file imports 'pkg.sub' or pkg/__init__ binds it by a relative import (or, in a stub, re-exports it); "
                "it exists at run time"
            )
        if defs[0].name == "__eq__" and cls.decorators:
            return "'__eq__' of a dataclass: pyright replaces it by the dataclass's synthesized '__eq__' and does not check it"
        if isinstance(member, ClassInfo) and member.summary is not None and _is_stdlib_source(member.summary.path):
            return "the base member is in the standard-library source but typeshed, which pyright reads, does not declare it"
        return "other"


def _is_stdlib_source(path: str) -> bool:
    stdlib = os.path.dirname(os.__file__) + os.sep
    return path.startswith(stdlib) and "-packages" + os.sep not in path


def _grouped(keys: Sequence[Key], explain: Explainer, side: str, tree: str, samples: int) -> None:
    groups: dict[str, list[Key]] = defaultdict(list)
    for key in keys:
        groups[explain.reason(key[0], key[1], side)].append(key)
    for reason, members in sorted(groups.items(), key=lambda item: -len(item[1])):
        print(f"  {len(members):5d}  {reason}")
        for path, line in sorted(members)[:samples]:
            print(f"           e.g. {os.path.relpath(path, tree)}:{line}  {explain.source_line(path, line)}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run both tools on the tree and print the comparison."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tree", default=DEFAULT_TREE, help="source tree to check (default: installed torch)")
    parser.add_argument(
        "--pyright-cache", default="/tmp/kvcontract_bench_pyright.json", help="where pyright's JSON is cached"
    )
    parser.add_argument("--rerun-pyright", action="store_true", help="run pyright even if its output is cached")
    parser.add_argument("--runs", type=int, default=3, help="kvcontract-lint runs; the best time counts")
    parser.add_argument("--jobs", type=int, default=default_jobs(), help="kvcontract-lint worker processes")
    parser.add_argument("--samples", type=int, default=3, help="examples shown per difference group")
    args = parser.parse_args(argv)
    tree = os.path.realpath(args.tree)

    pyright = run_pyright(tree, args.pyright_cache, args.rerun_pyright)
    lint = run_lint(tree, args.runs, args.jobs)
    matched = pyright.findings & lint.findings
    only_pyright = sorted(pyright.findings - lint.findings)
    only_lint = sorted(lint.findings - pyright.findings)

    print(
        f"tree: {tree} ({lint.files} .py files, {lint.lines:,} lines); pyright {pyright.version}; {args.jobs} worker(s)"
    )
    print(f"pyright (reportImplicitOverride only)  {pyright.seconds:8.2f} s")
    print(
        f"kvcontract-lint --select KVC001        {lint.seconds:8.2f} s wall (best of {args.runs}), {lint.cpu_seconds:.2f} s CPU"
    )
    print(f"speed ratio                            {pyright.seconds / lint.seconds:8.1f} x")
    print(f"lines/s per core (wall x {args.jobs} cores)     {lint.lines / (lint.seconds * args.jobs):10,.0f}")
    print(f"lines/s per CPU second                 {lint.lines / max(lint.cpu_seconds, 1e-9):10,.0f}")
    print(f"findings: pyright {len(pyright.findings)}, kvcontract-lint {len(lint.findings)}")
    print(f"matched {len(matched)}, only-pyright {len(only_pyright)}, only-lint {len(only_lint)}")
    explain = Explainer(tree, args.jobs)
    if only_pyright:
        print("only-pyright, by reason:")
        _grouped(only_pyright, explain, "pyright", tree, args.samples)
    if only_lint:
        print("only-lint, by reason:")
        _grouped(only_lint, explain, "lint", tree, args.samples)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
