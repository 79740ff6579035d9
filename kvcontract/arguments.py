"""The argument parser of both commands (``kvcontract`` and ``kvcontract-lint``): a usage error is
one line naming the error and where help is, as every other error of the commands, not the usage
block argparse prints first. It imports nothing but argparse, so the lint stays free of the runtime."""

from __future__ import annotations

import argparse
from typing import NoReturn

from typing_extensions import override

__all__ = ["USAGE_ERROR", "OneLineParser"]

USAGE_ERROR = 2
"""The exit status of a usage error."""


class OneLineParser(argparse.ArgumentParser):
    """argparse with its usage errors on one line; subcommands' parsers are of this class too."""

    @override
    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
