"""The ``kvcontract-lint`` command (also ``kvcontract lint``): arguments, configuration, output, exit code.

Exit status: 0 when clean, 1 when findings remain, 2 on a usage or internal error.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence

from kvcontract.arguments import OneLineParser, installed_version
from kvcontract.lint.codes import known_code
from kvcontract.lint.config import ConfigError, LintConfig, load_config, parse_version
from kvcontract.lint.discover import discover
from kvcontract.lint.fix import fix_files
from kvcontract.lint.parse import default_jobs
from kvcontract.lint.report import FORMATS, Format, render, statistics
from kvcontract.lint.runner import LintSettings, lint_files
from kvcontract.lint.static_conditions import Target

__all__ = ["build_parser", "main"]

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _codes(text: str) -> list[str]:
    try:
        return [known_code(code) for code in text.split(",") if code.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser(prog: str = "kvcontract-lint") -> argparse.ArgumentParser:
    """The argument parser of the command."""
    parser = OneLineParser(
        prog=prog,
        description="Check that subclasses carry @override and honour kvcontract contracts (KVC001-KVC007).",
    )
    parser.add_argument("paths", nargs="*", default=["."], help="files or directories to check (default: .)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument(
        "--select", type=_codes, help="comma-separated codes or prefixes to enable (replaces the configured ones)"
    )
    parser.add_argument("--ignore", type=_codes, default=[], help="comma-separated codes or prefixes to disable")
    parser.add_argument("--fix", action="store_true", help="add missing @override and drop redundant copies, in place")
    parser.add_argument("--diff", action="store_true", help="print the fixes as a diff instead of writing them")
    parser.add_argument("--statistics", action="store_true", help="print the number of findings per rule")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    parser.add_argument("--config", help="pyproject.toml to read [tool.kvcontract-lint] from (default: the nearest)")
    parser.add_argument("--target-version", help="Python version of the checked code, e.g. 3.10")
    parser.add_argument("--extra-root", action="append", default=[], help="another directory to resolve bases from")
    parser.add_argument(
        "--contract-base", action="append", default=[], help="another contract class, by qualified name"
    )
    parser.add_argument(
        "--exempt-dunders", action="store_true", default=None, help="exempt every __dunder__ method from KVC001"
    )
    parser.add_argument("--no-respect-gitignore", action="store_true", help="also check files that .gitignore excludes")
    parser.add_argument("--jobs", type=int, default=default_jobs(), help="worker processes for parsing (default: CPUs)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}")
    return parser


def _settings(args: argparse.Namespace, config: LintConfig) -> LintSettings:
    version = parse_version(args.target_version, "--target-version") if args.target_version else config.target_version
    current = (sys.version_info.major, sys.version_info.minor)
    return LintSettings(
        select=tuple(args.select) if args.select is not None else config.select,
        ignore=(*config.ignore, *args.ignore),
        per_file_ignores=config.per_file_ignores,
        extra_roots=(*config.extra_roots, *(os.path.abspath(r) for r in args.extra_root)),
        contract_bases=(*config.contract_bases, *args.contract_base),
        exempt_dunders=config.exempt_dunders if args.exempt_dunders is None else args.exempt_dunders,
        target=Target(version or current, sys.platform),
        jobs=max(1, args.jobs),
        project_root=config.root,
    )


def _diff(path: str, before: str, after: str, base: str) -> str:
    shown = os.path.relpath(path, base)
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{shown}", f"b/{shown}"
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _run(args: argparse.Namespace, prog: str) -> int:
    start = args.paths[0] if args.paths else "."
    config = load_config(start if os.path.exists(start) else ".", args.config)
    settings = _settings(args, config)
    files = discover(
        args.paths,
        root=config.root,
        exclude=config.exclude,
        respect_gitignore=config.respect_gitignore and not args.no_respect_gitignore,
    )
    base = os.getcwd()
    if args.fix or args.diff:
        outcome = fix_files(files, settings)
        findings = outcome.result.findings
        if args.diff:
            for path in sorted(outcome.fixed):
                sys.stdout.write(_diff(path, outcome.originals[path], outcome.fixed[path], base))
            return EXIT_FINDINGS if outcome.fixed and not args.exit_zero else EXIT_CLEAN
        for path, text in outcome.fixed.items():
            with open(path, "w", encoding=outcome.encodings[path], newline="") as handle:
                handle.write(text)
        if outcome.applied:
            sys.stderr.write(f"Fixed {outcome.applied} finding(s) in {len(outcome.fixed)} file(s).\n")
    else:
        findings = lint_files(files, settings).findings
    fmt: Format = args.format
    sys.stdout.write(render(findings, fmt, base, installed_version()))
    if args.statistics:
        sys.stdout.write(statistics(findings))
    if not findings and fmt == "text":  # a clean run says what it read, on standard error: stdout stays empty
        sys.stderr.write(f"{prog}: {len(files)} file{'s' if len(files) != 1 else ''} read, no findings\n")
    if findings and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def main(argv: Sequence[str] | None = None, prog: str = "kvcontract-lint") -> int:
    """Run the command with ``argv`` (default: the process arguments); returns the exit status.

    ``prog`` is the name it goes by in help and errors (``kvcontract lint`` under ``kvcontract``)."""
    parser = build_parser(prog)
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    try:
        return _run(args, prog)
    except (ConfigError, FileNotFoundError) as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        return EXIT_ERROR
    except Exception as exc:  # a crash must still exit 2, naming what went wrong
        sys.stderr.write(f"{prog}: internal error: {type(exc).__name__}: {exc}\n")
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
