"""One finding of kvcontract-lint, and the edit that fixes it when there is one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kvcontract.lint.codes import RULES

__all__ = ["AddOverride", "Finding", "Fix", "Unwrap"]


class AddOverride(NamedTuple):
    """Insert ``@{name}`` before line ``before_line`` (1-based) at the def's indentation.

    ``import_from`` names the module to import ``name`` from, or is ``None`` when the
    module already binds it.
    """

    before_line: int
    def_line: int
    name: str
    import_from: str | None


class Unwrap(NamedTuple):
    """Replace the call spanning (line, col)-(end_line, end_col) with ``replacement``.

    Lines are 1-based; columns are 0-based offsets in the line's UTF-8 bytes, as ``ast`` gives them.
    """

    line: int
    col: int
    end_line: int
    end_col: int
    replacement: str


Fix = AddOverride | Unwrap


@dataclass(frozen=True, slots=True)
class Finding:
    """A rule broken at ``path:line:col`` (1-based line and column)."""

    path: str
    line: int
    col: int
    code: str
    message: str
    fix: Fix | None = None

    @property
    def name(self) -> str:
        """The rule's kebab-case name."""
        return RULES[self.code].name

    def sort_key(self) -> tuple[str, int, int, str]:
        """Order by file, then position, then code."""
        return (self.path, self.line, self.col, self.code)
