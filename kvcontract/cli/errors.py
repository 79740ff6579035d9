"""The error a command raises for what the user gave wrong: one line, exit status 2."""

from __future__ import annotations

__all__ = ["Terminated", "UsageError"]


class UsageError(Exception):
    """A user error: reported as one line, exit status 2."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is so that it ends as an interrupt does: outputs whole or absent, progress told."""
