"""The strict type-check gate: mypy, pyright, pyright --verifytypes and the fail/ expectations.

Run from anywhere: ``python tools/typecheck_gate.py``. Settings come from pyproject.toml,
so editors see the same rules. Exits 1 if any step fails, printing each step's verdict.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAIL_CASES = ROOT / "typecheck" / "fail"
MIN_FAIL_CASES = 12
_MYPY_IGNORE = re.compile(r"# type: ignore\[([\w-]+)\]")
_PYRIGHT_IGNORE = re.compile(r"# pyright: ignore\[(\w+)\]")


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
        command, cwd=ROOT, capture_output=True, text=True, check=False,
        env={**os.environ, "PATH": path},
    )
    return completed.returncode, completed.stdout + completed.stderr


def mypy_step() -> StepResult:
    """mypy --strict with explicit-override, as configured in pyproject.toml."""
    code, output = run([sys.executable, "-m", "mypy"])
    last = output.strip().splitlines()[-1] if output.strip() else "no output"
    return StepResult("mypy --strict", code == 0, last, output)


def pyright_step() -> StepResult:
    """pyright strict with reportImplicitOverride, as configured in pyproject.toml."""
    code, output = run([sys.executable, "-m", "pyright"])
    last = output.strip().splitlines()[-1] if output.strip() else "no output"
    return StepResult("pyright strict", code == 0, last, output)


def verifytypes_step() -> StepResult:
    """pyright --verifytypes kvcontract: the public interface must be 100% typed."""
    code, output = run(
        [sys.executable, "-m", "pyright", "--verifytypes", "kvcontract", "--ignoreexternal",
         "--outputjson"]
    )
    try:
        report = json.loads(output[output.index("{"):])
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
    problems = [
        f"{symbol['name']}: {diagnostic['message']}"
        for symbol in completeness["symbols"]
        for diagnostic in symbol["diagnostics"]
        if diagnostic["severity"] == "error"
    ]
    summary = f"completeness {score:.1%} over {completeness['exportedSymbolCounts']['withKnownType']} symbols"
    return StepResult(
        "pyright --verifytypes", code == 0 and score == 1.0, summary, "\n".join(problems)
    )


def fail_cases_step() -> StepResult:
    """Each expected failure in typecheck/fail/ names both checkers' error codes."""
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
    results: list[StepResult] = []
    for step in (mypy_step, pyright_step, verifytypes_step, fail_cases_step):
        started = time.perf_counter()
        result = step()
        results.append(result)
        verdict = "PASS" if result.passed else "FAIL"
        print(f"[{verdict}] {result.name} ({time.perf_counter() - started:.1f}s): {result.summary}")
        if not result.passed and result.output:
            print(result.output.rstrip())
    failed = [r.name for r in results if not r.passed]
    print("gate: " + ("passed" if not failed else f"FAILED ({', '.join(failed)})"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
