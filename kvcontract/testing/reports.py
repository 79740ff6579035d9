"""Waiting for a job's report, as the tier and worker machines do: within a bound, and exactly once."""

from __future__ import annotations

import time
from collections.abc import Callable

from kvcontract.contracts import TransferResult
from kvcontract.testing.conformance import require

__all__ = ["JOB_SECONDS", "one_report"]

JOB_SECONDS = 10.0
"""How long a job may take to be reported before the machine calls it lost."""


def one_report(get_finished: Callable[[], list[TransferResult]], job: int) -> TransferResult:
    """Poll ``get_finished`` until it reports ``job``: the first report must be ``job``'s alone, within :data:`JOB_SECONDS`."""
    deadline = time.monotonic() + JOB_SECONDS
    while time.monotonic() < deadline:
        results = get_finished()
        if results:
            reported = [result.job_id for result in results]
            require(reported == [job], "each job is reported exactly once", f"reports {reported} for job {job}")
            return results[0]
        time.sleep(0.001)
    require(False, "every submitted job is reported", f"job {job} not reported within {JOB_SECONDS} s")
    raise AssertionError("unreachable")
