"""The error a command raises for what the user gave wrong: one line, exit status 2."""

from __future__ import annotations

__all__ = ["UsageError"]


class UsageError(Exception):
    """A user error: reported as one line, exit status 2."""
