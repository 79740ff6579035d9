"""An interrupted run says how far it got: Ctrl-C ends with 130, SIGTERM with 143, no output file half written."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from kvcontract.contracts import OffloadKey
from kvcontract.sim.simulator import EngineSimulator
from tests.cli.support import run_cli


def interrupt_at(request: int, interrupt: Callable[[], None], monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the simulator's ``request``-th request call ``interrupt`` instead of serving it."""
    serve = EngineSimulator._serve  # pyright: ignore[reportPrivateUsage]  # the one request step, to interrupt

    def serve_until(self: EngineSimulator, index: int, hash_ids: Sequence[int], keys: Sequence[OffloadKey]) -> None:
        if index == request:
            interrupt()
        serve(self, index, hash_ids, keys)

    monkeypatch.setattr(EngineSimulator, "_serve", serve_until)


def ctrl_c() -> None:
    raise KeyboardInterrupt


def sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.parametrize(
    ("interrupt", "status", "said"), [(ctrl_c, 130, "interrupted"), (sigterm, 143, "terminated (SIGTERM)")]
)
@pytest.mark.parametrize(
    ("engines", "progress"), [("1", "simulating on cpu: 7 of 40 done"), ("2", "simulating 2 engines: ")]
)
def test_an_interrupted_simulation_says_how_far_it_got(
    interrupt: Callable[[], None],
    status: int,
    said: str,
    engines: str,
    progress: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With several engines each serves its share on a thread, so how far they got varies by a request or two."""
    interrupt_at(7, interrupt, monkeypatch)
    run = ["simulate", "--engines", engines, "--requests", "40", "--json", str(tmp_path / "run.json")]
    outcome = run_cli(capsys, *run)
    assert outcome.status == status
    assert outcome.err.strip().startswith(f"kvcontract: {said}; {progress}")
    assert outcome.err.strip().endswith(" of 40 done")
    assert list(tmp_path.iterdir()) == []


def test_the_sigterm_handler_is_put_back_after_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGTERM)
    assert run_cli(capsys, "simulate", "--requests", "3", "--json").status == 0
    assert signal.getsignal(signal.SIGTERM) is before
