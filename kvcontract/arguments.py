"""The argument parser of both commands (``kvcontract`` and ``kvcontract-lint``) and the version
their ``--version`` prints: a usage error is one line naming the error and where help is, as
every other error of the commands, not the usage block argparse prints first. It imports
nothing but the standard library, so the lint stays free of the runtime."""

from __future__ import annotations

import argparse
from importlib import metadata
from typing import NoReturn

from typing_extensions import override

__all__ = ["USAGE_ERROR", "OneLineParser", "installed_version"]

USAGE_ERROR = 2
"""The exit status of a usage error."""


class OneLineParser(argparse.ArgumentParser):
    """argparse with its usage errors on one line; subcommands' parsers are of this class too."""

    @override
    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def installed_version() -> str:
    """The installed distribution's version (``0.1.0``), or the package's own in a checkout never installed."""
    try:
        return metadata.version("kvcontract")
    except metadata.PackageNotFoundError:
        from kvcontract import __version__

        return __version__
