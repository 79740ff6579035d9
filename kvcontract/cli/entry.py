"""The command line's entry point: one parse, one handler, and every user error as one line with status 2."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from types import FrameType

from kvcontract.arguments import USAGE_ERROR, OneLineParser
from kvcontract.cli.errors import Terminated, UsageError
from kvcontract.cli.parser import build_parser
from kvcontract.cli.streams import discard_stdout, writing

__all__ = ["main"]


_CLOSED_PIPE = 141
"""128 + SIGPIPE: what a shell reports for a process that a closed pipe ended."""
_INTERRUPTED = 130
"""128 + SIGINT (Ctrl-C)."""
_TERMINATED = 143
"""128 + SIGTERM."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["lint"]:
        from kvcontract.lint.cli import main as lint_main

        return lint_main(arguments[1:], prog="kvcontract lint")
    parser = build_parser()
    options, unknown = parser.parse_known_args(arguments)
    if unknown:
        command_parser: OneLineParser = getattr(options, "command_parser", parser)
        command_parser.reject(unknown)
    try:
        _check_environment()
        with _sigterm_interrupts():
            status = int(options.handler(options))
        with writing():
            sys.stdout.flush()
        return status
    except BrokenPipeError:
        discard_stdout()
        return _CLOSED_PIPE
    except KeyboardInterrupt as interruption:
        how = "terminated (SIGTERM)" if isinstance(interruption, Terminated) else "interrupted"
        progress = "".join(f"; {note}" for note in getattr(interruption, "__notes__", ()))
        print(f"kvcontract: {how}{progress}", file=sys.stderr)
        return _TERMINATED if isinstance(interruption, Terminated) else _INTERRUPTED
    except Exception as error:
        message = _one_line(error)
        if message is None:
            raise
        print(f"kvcontract: error: {message}", file=sys.stderr)
        return USAGE_ERROR


@contextmanager
def _sigterm_interrupts() -> Generator[None, None, None]:
    """While a command runs, SIGTERM raises :class:`Terminated` in the main thread, as Ctrl-C raises
    ``KeyboardInterrupt``; the handler before is put back after (a caller in-process keeps its own)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _check_environment() -> None:
    """``KVCONTRACT_CHECKS`` is read when the first contract call is checked: read it up front,
    so that a bad value is one line here, not an error in the middle of a run."""
    from kvcontract.enforce import checks_mode

    try:
        checks_mode()
    except ValueError as error:
        raise UsageError(str(error)) from None


def _is_secret_file_error(error: Exception) -> bool:
    """Whether ``error`` is a key or password file refused (owner, mode, length).

    Looked up among the loaded modules: importing the tiers here would build their contract
    classes, and a bad ``KVCONTRACT_CHECKS`` would then fail this very report.
    """
    integrity = sys.modules.get("kvcontract.tiers.integrity")
    refused: object = getattr(integrity, "SecretFileError", None)
    return isinstance(refused, type) and isinstance(error, refused)


def _one_line(error: Exception) -> str | None:
    """The line that reports a known user error, or ``None`` for anything else (a bug)."""
    from kvcontract.config import ConfigError
    from kvcontract.extras import MissingExtraError
    from kvcontract.sim.trace import TraceFormatError

    if isinstance(error, (UsageError, ConfigError, TraceFormatError)) or _is_secret_file_error(error):
        return " ".join(str(error).split())
    if isinstance(error, MissingExtraError):
        return str(error)
    if isinstance(error, OSError):
        reason = error.strerror or str(error)
        return f"{error.filename}: {reason}" if error.filename is not None else reason
    return None
