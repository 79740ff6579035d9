"""``kvcontract check``: a project's components through the conformance kit, beside the lint."""

from __future__ import annotations

import argparse
from typing import cast

from kvcontract.arguments import USAGE_ERROR
from kvcontract.cli.errors import UsageError
from kvcontract.cli.streams import writing

__all__ = ["run_check"]


def run_check(options: argparse.Namespace) -> int:
    """``kvcontract check``: the lint, then each component the project names through the conformance kit."""
    import tomllib

    from kvcontract.lint.cli import main as lint_main
    from kvcontract.testing.components import (
        ComponentError,
        check_component,
        read_components,
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
        components = read_components(table)
    except ComponentError as error:
        raise UsageError(str(error)) from None
    status = lint_main([str(path) for path in options.paths])
    if status == USAGE_ERROR:
        return status
    for spec in components:
        outcome = check_component(spec, "thorough" if options.thorough else "fast")
        with writing():
            print(outcome.line)
            print(outcome.reproducer, end="")
        if outcome.error is not None:
            status = 1
    return status
