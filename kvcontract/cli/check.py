"""``kvcontract check``: a project's components through the conformance kit, beside the lint."""

from __future__ import annotations

import argparse
import sys
from typing import cast

from kvcontract.arguments import USAGE_ERROR
from kvcontract.cli.errors import UsageError
from kvcontract.cli.streams import writing

__all__ = ["run_check"]


def run_check(options: argparse.Namespace) -> int:
    """``kvcontract check``: the lint, then each component the project names through the conformance kit.

    Exit 2 if a component cannot be imported (each such one is named in one line, after the
    lint's findings and beside the others' verdicts), else 1 on any finding or broken rule.
    """
    import tomllib

    from kvcontract.lint.cli import main as lint_main
    from kvcontract.testing.components import (
        ComponentError,
        check_component,
        component_entries,
        resolve,
    )

    # The project is read before the lint runs, so a bad --project stops with one line and no findings.
    wanted = '[tool.kvcontract] components = ["package.module:Name", ...]'
    try:
        found: object = tomllib.loads(options.project.read_text(encoding="utf-8")).get("tool", {}).get("kvcontract", {})
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{options.project}: not valid TOML: {error}") from None
    except FileNotFoundError:
        raise UsageError(
            f"{options.project}: no such file; kvcontract check reads {wanted} from it (give another with --project)"
        ) from None
    table = cast("dict[str, object]", found) if isinstance(found, dict) else {}  # a TOML table has string keys
    if not table.get("components"):
        raise UsageError(
            f"{options.project}: no components to check: kvcontract check looked for {wanted}; "
            "add it, or run kvcontract lint to lint alone"
        )
    try:
        entries = component_entries(table)
    except ComponentError as error:
        raise UsageError(str(error)) from None
    # The lint runs before any component is imported: a component that does not import (a class
    # its module defines refused at creation, say) still gets the findings that explain why.
    status = lint_main([str(path) for path in options.paths])
    if status == USAGE_ERROR:
        return status
    unresolved = False
    for entry in entries:
        try:
            spec = resolve(entry)
        except ComponentError as error:  # one line, as the entry point words a user error; the others still run
            print(f"kvcontract: error: {' '.join(str(error).split())}", file=sys.stderr)
            unresolved = True
            continue
        outcome = check_component(spec, "thorough" if options.thorough else "fast")
        with writing():
            print(outcome.line)
            print(outcome.reproducer, end="")
        if outcome.error is not None:
            status = 1
    return USAGE_ERROR if unresolved else status
