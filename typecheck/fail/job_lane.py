"""Job lanes whose run, size or jobs disagree on the job type."""

from __future__ import annotations

from collections.abc import Sequence

from kvcontract.tiers.io_pool import PriorityThreadPool
from kvcontract.tiers.job_lane import JobLane


def run_texts(batch: Sequence[str]) -> None:
    del batch


def misuse(pool: PriorityThreadPool) -> None:
    numbers: JobLane[int] = JobLane(pool, 0, run_texts, size=len, merge_up_to=64)  # type: ignore[arg-type]  # pyright: ignore[reportAssignmentType]
    texts = JobLane(pool, 0, run_texts, size=len, merge_up_to=64)
    texts.put(3)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    JobLane(pool, 0, run_texts, size=len, merge_up_to="64")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    del numbers
