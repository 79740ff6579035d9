"""The one config error, and how a pydantic validation error becomes its lines (each naming its field)."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping, Sequence
from typing import get_args

from pydantic import (
    BaseModel,
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


def describe_errors(
    error: ValidationError, model: type[BaseModel] | None = None, origins: Mapping[str, str] | None = None
) -> list[str]:
    """One line per problem of ``error``, each naming its field path and the value given.

    An unknown field of ``model`` gets the nearest known name; a field set by an environment
    variable (``origins``: field path to variable) names the variable.
    """
    lines: list[str] = []
    for problem in error.errors(include_url=False):
        message = problem["msg"].removeprefix("Value error, ")
        if not problem["loc"]:
            lines.append(message)
            continue
        location = _field_path(problem["loc"])
        given = problem.get("input")
        shown = "" if isinstance(given, (dict, list)) or given is None else f" (got {shown_value(given)})"
        if problem["type"] == "extra_forbidden" and model is not None:
            message, shown = _unknown_field(model, problem["loc"]), ""
        lines.append(f"{location}{_origin(location, origins or {})}: {message}{shown}")
    return lines


def _origin(location: str, origins: Mapping[str, str]) -> str:
    """`` (from VARIABLE)`` when an environment variable set the field at ``location``, a section
    above it, or a field below it (a misspelt section exists only through its variable)."""
    for path, variable in origins.items():
        if location == path or location.startswith(f"{path}.") or path.startswith(f"{location}."):
            return f" (from {variable})"
    return ""


def _unknown_field(model: type[BaseModel], location: Sequence[int | str]) -> str:
    """What an unknown field at ``location`` gets: the nearest known name beside it, or the known names."""
    known = sorted({name for owner in _models_at(model, location[:-1]) for name in owner.model_fields})
    nearest = difflib.get_close_matches(str(location[-1]), known, n=1)
    if nearest:
        return f"unknown field; did you mean {nearest[0]}?"
    return f"unknown field; known here: {', '.join(known)}"


def _models_at(model: type[BaseModel], location: Sequence[int | str]) -> list[type[BaseModel]]:
    """The models that can hold the fields at ``location`` (list indexes skipped, ``kind`` tags picking a member)."""
    candidates = [model]
    for part in location:
        if isinstance(part, int):
            continue
        tagged = [owner for owner in candidates if _kind_of(owner) == part]
        if tagged:
            candidates = tagged
            continue
        candidates = [
            inner
            for owner in candidates
            if part in owner.model_fields
            for inner in _models_in(owner.model_fields[part].annotation)
        ]
    return candidates


def _kind_of(model: type[BaseModel]) -> object:
    field = model.model_fields.get("kind")
    return None if field is None else field.default


def _models_in(annotation: object) -> list[type[BaseModel]]:
    """The models an annotation holds: itself, a union's members, a list's items, through ``Annotated``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in get_args(annotation) for model in _models_in(argument)]


def shown_value(value: object) -> str:
    """``value`` as an error shows it: at most 80 characters, and huge integers by their size
    (Python refuses to print integers of more than 4,300 digits)."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


_KIND_TAGS = frozenset({"cpu", "tiering", "file", "redis", "mooncake", "external"})
"""The tags pydantic puts in a field's path for the member of a union ``kind`` picks (``external``: a tier of another package)."""


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
