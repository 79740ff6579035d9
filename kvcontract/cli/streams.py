"""Standard output and the files commands write: failures there are user errors, never tracebacks."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

from kvcontract.cli.errors import UsageError

__all__ = ["STDOUT", "check_distinct", "check_writable", "discard_stdout", "writing", "wrote"]


STDOUT = "-"


@contextmanager
def writing() -> Generator[None, None, None]:
    """Around writes to standard output: one that fails on a full disk or a broken device is a
    user error, and standard output then points at the null device, so that the interpreter's
    own last flush cannot fail again (a closed pipe passes through as ``BrokenPipeError``)."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as error:
        discard_stdout()
        raise UsageError(f"cannot write to standard output: {error.strerror or error}") from None


def discard_stdout() -> None:
    """Point standard output at the null device: what is still buffered there is dropped."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a caller (tests, an embedding program)
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, descriptor)
    os.close(null)


def wrote(what: str, path: Path) -> None:
    """Say on standard error which file a command wrote, so that standard output keeps only its report."""
    print(f"kvcontract: wrote {what} to {path}", file=sys.stderr)


def check_writable(path: Path, option: str) -> None:
    """Refuse an output path before the run rather than after it: its folder must take a new file."""
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a directory; give a file name")
    folder = path.parent
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise UsageError(f"{option} {path}: cannot write in {folder}: {error.strerror or error}") from None


def check_distinct(outputs: dict[str, Path | None]) -> None:
    """Refuse one file named by two options (``--json run.png --plot run.png``): the second write would replace the first."""
    seen: dict[str, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        real = os.path.realpath(path)
        if real in seen:
            raise UsageError(f"{seen[real]} and {option} both name {path}: give each output its own file")
        seen[real] = option
