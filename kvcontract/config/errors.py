"""The one config error, and how a pydantic validation error becomes its lines (each naming its field)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pydantic import (
    ValidationError,
)


class ConfigError(ValueError):
    """A config file or value is invalid: ``problems`` names each bad field and what was expected.

    ``str()`` gives them on one line, for a command that ends with one clear line.
    """

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source: str = source
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__(f"{source}: {'; '.join(self.problems)}")


def describe_errors(error: ValidationError) -> list[str]:
    """One line per problem of ``error``, each naming its field path and the value given."""
    lines: list[str] = []
    for problem in error.errors(include_url=False):
        message = problem["msg"].removeprefix("Value error, ")
        if not problem["loc"]:
            lines.append(message)
            continue
        location = _field_path(problem["loc"])
        given = problem.get("input")
        shown = "" if isinstance(given, (dict, list)) or given is None else f" (got {shown_value(given)})"
        lines.append(f"{location}: {message}{shown}")
    return lines


def shown_value(value: object) -> str:
    """``value`` as an error shows it: at most 80 characters, and huge integers by their size
    (Python refuses to print integers of more than 4,300 digits)."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


_KIND_TAGS = frozenset({"cpu", "tiering", "file", "redis", "mooncake"})


def _field_path(location: Sequence[int | str]) -> str:
    """The field's path as written in the file: without the ``kind`` tags pydantic inserts."""
    parts = [
        str(part)
        for i, part in enumerate(location)
        if not (part in _KIND_TAGS and i and (location[i - 1] == "manager" or isinstance(location[i - 1], int)))
    ]
    return ".".join(parts)


def parse_failure(error: Exception) -> str:
    """A parser's complaint on one line, short, in the user's terms."""
    detail = " ".join(str(error).split())
    if isinstance(error, ValueError) and "integer string conversion" in detail:
        return f"an integer has more than {sys.get_int_max_str_digits()} digits"
    return detail if len(detail) <= 300 else f"{detail[:297]}..."
