"""The strict type-check gate: mypy, pyright, pyright --verifytypes and the fail/ expectations.

Run from anywhere: ``python tools/typecheck_gate.py``. Settings come from pyproject.toml,
so editors see the same rules. Exits 1 if any step fails, printing each step's verdict.

The optional parts whose modules the checkers need (the ``redis`` extra, the vLLM release the
``vllm`` extra pins) may be missing after the README's install: the files that import one
(and those that import such a file at module level) are then left out of the verdict, and
the gate says in one line what it skipped and what to install. ``--require-all`` (CI) makes
a missing part a failure instead.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
FAIL_CASES = ROOT / "typecheck" / "fail"
MIN_FAIL_CASES = 12
_MYPY_IGNORE = re.compile(r"# type: ignore\[([\w-]+)\]")
_PYRIGHT_IGNORE = re.compile(r"# pyright: ignore\[(\w+)\]")
_MYPY_ERROR = re.compile(r"^(?P<path>[^:\n]+\.pyi?):\d+: error: ", re.MULTILINE)
CHECKED_ROOTS = ("kvcontract", "tests", "tools", "typecheck")


@dataclass(frozen=True)
class OptionalPart:
    """An extra whose package the checkers need, and how to install it for the gate."""

    extra: str
    module: str
    install: str
    """The command, with ``{requirement}`` for the extra's requirement in pyproject.toml."""


def install_commands(requirements: Path) -> list[str]:
    """The install commands at the top of a ``requirements/*.txt`` file (``#   python -m pip install ...``,
    comments cut): the one source of an engine's CPU-test install, which the docs and this gate quote."""
    commands: list[str] = []
    for line in requirements.read_text(encoding="utf-8").splitlines():
        text = line.lstrip("#").strip()
        if line.startswith("#") and text.startswith("python -m pip install"):
            commands.append(text.split("  #")[0].strip())
    return commands


OPTIONAL_PARTS = (
    OptionalPart("redis", "redis", "pip install -e '.[redis]' --config-settings editable_mode=compat"),
    OptionalPart("vllm", "vllm", " && ".join(install_commands(ROOT / "requirements" / "vllm.txt"))),
)


@dataclass(frozen=True)
class Skipped:
    """An optional part that is not installed, and the files that need it."""

    requirement: str
    why: str
    install: str
    files: frozenset[str]


def _requirement(extra: str, module: str) -> Requirement:
    """The requirement of ``extra`` in pyproject.toml that installs ``module``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    texts: list[str] = project["optional-dependencies"][extra]
    return next(r for r in map(Requirement, texts) if r.name.replace("-", "_") == module)


def _missing(requirement: Requirement) -> str | None:
    """Why ``requirement`` is not met here, or ``None`` if it is."""
    try:
        installed = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        return "not installed"
    if requirement.specifier.contains(installed, prereleases=True):
        return None
    return f"{installed} installed"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.Module, module_level_only: bool) -> Iterator[str]:
    """The modules ``tree`` imports, everywhere or only in its top-level statements."""
    nodes = tree.body if module_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def needing(module: str) -> frozenset[str]:
    """The checked files that import ``module``, and those that import one of them at module level."""
    trees = {
        path: ast.parse(path.read_text(encoding="utf-8"))
        for root in CHECKED_ROOTS
        for path in sorted((ROOT / root).rglob("*.py"))
    }
    direct = {
        path
        for path, tree in trees.items()
        if any(name.split(".")[0] == module for name in _imports(tree, module_level_only=False))
    }
    direct_modules = {_module_name(path) for path in direct}
    users = {
        path for path, tree in trees.items() if direct_modules.intersection(_imports(tree, module_level_only=True))
    }
    return frozenset(str(path.relative_to(ROOT)) for path in direct | users)


def skipped_parts() -> list[Skipped]:
    """The optional parts missing here, each with the files the checkers cannot judge without it."""
    found: list[Skipped] = []
    for part in OPTIONAL_PARTS:
        requirement = _requirement(part.extra, part.module)
        why = _missing(requirement)
        if why is not None:
            install = part.install.format(requirement=requirement)
            found.append(Skipped(str(requirement), why, install, needing(part.module)))
    return found


@dataclass(frozen=True)
class StepResult:
    """One gate step: its name, whether it passed, and what it said."""

    name: str
    passed: bool
    summary: str
    output: str = ""


def run(command: list[str]) -> tuple[int, str]:
    """Run ``command`` in the repository root; return its exit code and combined output.

    The gate's own interpreter comes first on ``PATH``: pyright finds the environment to
    check through the ``python`` it sees there, which must be this one.
    """
    path = os.pathsep.join((os.path.dirname(sys.executable), os.environ.get("PATH", "")))
    completed = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PATH": path},
    )
    return completed.returncode, completed.stdout + completed.stderr


def _verdict(name: str, code: int, errors: list[str], skip: frozenset[str], total: str, output: str) -> StepResult:
    """A checker's result once the errors in files that ``skip`` leaves out are set aside."""
    if not skip:
        return StepResult(name, code == 0, total, output)
    kept = [error for error in errors if error.split(":", 1)[0] not in skip]
    summary = (
        f"{len(kept)} errors outside the skipped files; {len(errors) - len(kept)} more in them, not counted "
        "(they import a part that is not installed, so the checkers cannot follow them)"
    )
    return StepResult(name, code in (0, 1) and not kept, summary, "\n".join(kept))


def mypy_step(skip: frozenset[str]) -> StepResult:
    """mypy --strict with explicit-override, as configured in pyproject.toml."""
    code, output = run([sys.executable, "-m", "mypy"])
    last = output.strip().splitlines()[-1] if output.strip() else "no output"
    errors = [line for line in output.splitlines() if _MYPY_ERROR.match(line)]
    if code not in (0, 1) or (code == 1 and not errors):
        return StepResult("mypy --strict", False, last, output)  # mypy itself failed
    return _verdict("mypy --strict", code, errors, skip, last, output)


def pyright_step(skip: frozenset[str]) -> StepResult:
    """pyright strict with reportImplicitOverride, as configured in pyproject.toml."""
    code, output = run([sys.executable, "-m", "pyright", "--outputjson"])
    try:
        report = json.loads(output[output.index("{") :])
    except ValueError:
        return StepResult("pyright strict", False, "no JSON report", output)
    errors = [
        f"{Path(d['file']).relative_to(ROOT)}:{d['range']['start']['line'] + 1}:"
        f"{d['range']['start']['character'] + 1} - error: {d['message']}" + (f" ({d['rule']})" if "rule" in d else "")
        for d in report["generalDiagnostics"]
        if d["severity"] == "error"
    ]
    counts = report["summary"]
    total = f"{counts['errorCount']} errors, {counts['warningCount']} warnings"
    return _verdict("pyright strict", code, errors, skip, total, "\n".join(errors))


def verifytypes_step(skip: frozenset[str]) -> StepResult:
    """pyright --verifytypes kvcontract: the public interface must be 100% typed."""
    code, output = run(
        [sys.executable, "-m", "pyright", "--verifytypes", "kvcontract", "--ignoreexternal", "--outputjson"]
    )
    try:
        report = json.loads(output[output.index("{") :])
    except ValueError:
        return StepResult("pyright --verifytypes", False, "no JSON report", output)
    completeness = report["typeCompleteness"]
    score = float(completeness["completenessScore"])
    if not completeness.get("pyTypedPath"):
        return StepResult(
            "pyright --verifytypes",
            False,
            "kvcontract has no py.typed visible to pyright: install the project with "
            "`pip install -e '.[dev]' --config-settings editable_mode=compat`",
            output,
        )
    skipped_modules = tuple(_module_name(ROOT / path) for path in skip if path.startswith("kvcontract/"))
    problems = [
        f"{symbol['name']}: {diagnostic['message']}"
        for symbol in completeness["symbols"]
        if not any(symbol["name"] == m or symbol["name"].startswith(f"{m}.") for m in skipped_modules)
        for diagnostic in symbol["diagnostics"]
        if diagnostic["severity"] == "error"
    ]
    summary = f"completeness {score:.1%} over {completeness['exportedSymbolCounts']['withKnownType']} symbols"
    if skip:
        summary += f"; {len(problems)} errors outside the skipped modules"
        return StepResult("pyright --verifytypes", not problems, summary, "\n".join(problems))
    return StepResult("pyright --verifytypes", code == 0 and score == 1.0, summary, "\n".join(problems))


def fail_cases_step(skip: frozenset[str]) -> StepResult:
    """Each expected failure in typecheck/fail/ names both checkers' error codes (``skip`` does not apply)."""
    cases = 0
    unpaired: list[str] = []
    for path in sorted(FAIL_CASES.glob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            has_mypy = bool(_MYPY_IGNORE.search(line))
            has_pyright = bool(_PYRIGHT_IGNORE.search(line))
            if has_mypy and has_pyright:
                cases += 1
            elif has_mypy or has_pyright:
                unpaired.append(f"{path.relative_to(ROOT)}:{number}: one checker's code only")
    passed = cases >= MIN_FAIL_CASES and not unpaired
    summary = f"{cases} expected failures, each pinned for mypy and pyright"
    if cases < MIN_FAIL_CASES:
        summary += f" (at least {MIN_FAIL_CASES} required)"
    return StepResult("typecheck/fail cases", passed, summary, "\n".join(unpaired))


def main() -> int:
    """Run every step, print a verdict per step, and fail if any step failed."""
    parser = argparse.ArgumentParser(description="The strict type-check gate.")
    parser.add_argument(
        "--require-all",
        action="store_true",
        help="fail when an optional part the checkers need is missing, instead of skipping its files (CI)",
    )
    args = parser.parse_args()
    missing = skipped_parts()
    for part in missing:
        verdict = "FAIL" if args.require_all else "SKIP"
        print(
            f"[{verdict}] {part.requirement} ({part.why}): {len(part.files)} files that need it are "
            f"{'unchecked' if args.require_all else 'left out'}; install it with: {part.install}"
        )
    if missing and args.require_all:
        print("gate: FAILED (--require-all: install the parts above)")
        return 1
    skip = frozenset[str]().union(*(part.files for part in missing))
    results: list[StepResult] = []
    for step in (mypy_step, pyright_step, verifytypes_step, fail_cases_step):
        started = time.perf_counter()
        result = step(skip)
        results.append(result)
        verdict = "PASS" if result.passed else "FAIL"
        print(f"[{verdict}] {result.name} ({time.perf_counter() - started:.1f}s): {result.summary}")
        if not result.passed and result.output:
            print(result.output.rstrip())
    failed = [r.name for r in results if not r.passed]
    passed = "passed" + (
        f" ({len(skip)} files left out, each importing a part not installed: see [SKIP] above; "
        "CI runs with --require-all)"
        if skip
        else ""
    )
    print("gate: " + (passed if not failed else f"FAILED ({', '.join(failed)})"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
