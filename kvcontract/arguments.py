"""The argument parser of both commands (``kvcontract`` and ``kvcontract-lint``) and the version
their ``--version`` prints: a usage error is one line naming the error and where help is, as
every other error of the commands, not the usage block argparse prints first. It imports
nothing but the standard library, so the lint stays free of the runtime."""

from __future__ import annotations

import argparse
import difflib
from importlib import metadata
from typing import NoReturn

from typing_extensions import override

__all__ = ["USAGE_ERROR", "OneLineParser", "installed_version"]

USAGE_ERROR = 2
"""The exit status of a usage error."""


_UNRECOGNIZED = "unrecognized arguments: "


class OneLineParser(argparse.ArgumentParser):
    """argparse with its usage errors on one line; subcommands' parsers are of this class too.

    An unknown option gets the nearest option of this parser (``--requets``: did you mean
    ``--requests``?), so a subcommand's parser should be the one to report it (:meth:`reject`).
    """

    @override
    def error(self, message: str) -> NoReturn:
        if message.startswith(_UNRECOGNIZED):
            message += self._nearest_option(message.removeprefix(_UNRECOGNIZED).split())
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def reject(self, unknown: list[str]) -> NoReturn:
        """Refuse the arguments ``unknown`` that parsing with this (sub)command's parser left over."""
        self.error(_UNRECOGNIZED + " ".join(unknown))

    def _nearest_option(self, unknown: list[str]) -> str:
        """``; did you mean --x?`` for the first unknown option with a near one, else nothing."""
        for word in unknown:
            if word.startswith("-"):
                # cutoff 0.75: --requets finds --requests; at difflib's 0.6, --bogus found --jobs
                near = difflib.get_close_matches(
                    word.partition("=")[0], list(self._option_string_actions), n=1, cutoff=0.75
                )
                if near:
                    return f"; did you mean {near[0]}?"
        return ""


def installed_version() -> str:
    """The installed distribution's version (``0.1.0``), or the package's own in a checkout never installed."""
    try:
        return metadata.version("kvcontract")
    except metadata.PackageNotFoundError:
        from kvcontract import __version__

        return __version__
