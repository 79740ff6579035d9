"""The one error for an optional dependency that is not installed: it names the extra that brings it.

``import kvcontract`` pulls none of the optional packages; each part that needs one imports
it when used and raises :class:`MissingExtraError` when it is missing, so the command line
reports every such case in one line by its type, never by reading the message.
"""

from __future__ import annotations

__all__ = ["MissingExtraError"]


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message says what needs it and how to install it."""

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message)
        self.extra = extra
        """The extra (``pip install 'kvcontract[<extra>]'``) that installs what was missing."""
