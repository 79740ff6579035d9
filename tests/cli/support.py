"""Running the kvcontract command in-process, with its output captured."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kvcontract.cli import main


@dataclass(frozen=True)
class Outcome:
    """What one command line did: its exit status and what it wrote."""

    status: int
    out: str
    err: str

    def assert_user_error(self, expected: str) -> None:
        """Exit 2 with one line on stderr that says ``expected``, and no traceback."""
        assert self.status == 2, (self.status, self.err)
        assert "Traceback" not in self.err
        assert len(self.err.strip().splitlines()) == 1, self.err
        assert expected in self.err, self.err


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Outcome:
    """``kvcontract argv...`` through :func:`kvcontract.cli.main`; argparse's own exit becomes its status."""
    try:
        status = main(list(argv))
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else 2
    captured = capsys.readouterr()
    return Outcome(status, captured.out, captured.err)
