"""The job lane: every job runs once, in order, one batch at a time, batches merged up to the bound."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcontract.tiers.io_pool import PriorityThreadPool
from kvcontract.tiers.job_lane import JobLane
from tests.tiers.test_io_pool import blocked_pool


class Recorder:
    """A lane's ``run``: records each batch of (job number, size) and whether two batches ever ran at once."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[int, int]]] = []
        self.overlapped = False
        self._running = threading.Lock()

    def run(self, batch: Sequence[tuple[int, int]]) -> None:
        if not self._running.acquire(blocking=False):
            self.overlapped = True
            return
        try:
            self.batches.append(list(batch))
        finally:
            self._running.release()


def _size(job: tuple[int, int]) -> int:
    return job[1]


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=40), max_size=60),
    merge_up_to=st.integers(min_value=1, max_value=100),
    threads=st.integers(min_value=1, max_value=4),
)
def test_every_job_runs_once_in_order_in_bounded_batches_one_at_a_time(
    sizes: list[int], merge_up_to: int, threads: int
) -> None:
    pool = PriorityThreadPool(threads, name="lane-test")
    recorder = Recorder()
    lane = JobLane(pool, 1, recorder.run, size=_size, merge_up_to=merge_up_to)
    for number, size in enumerate(sizes):
        lane.put((number, size))
    pool.shutdown()
    assert not recorder.overlapped
    assert [job for batch in recorder.batches for job in batch] == list(enumerate(sizes))
    assert all(len(batch) == 1 or sum(map(_size, batch)) <= merge_up_to for batch in recorder.batches)


def test_the_jobs_queued_behind_a_batch_go_together_up_to_the_bound() -> None:
    pool, release = blocked_pool()
    recorder = Recorder()
    lane = JobLane(pool, 1, recorder.run, size=_size, merge_up_to=10)
    for number, size in enumerate([4, 3, 3, 4, 20, 1]):
        lane.put((number, size))
    release.set()
    pool.shutdown()
    assert recorder.batches == [[(0, 4), (1, 3), (2, 3)], [(3, 4)], [(4, 20)], [(5, 1)]]


def test_tasks_of_a_lower_priority_value_run_between_batches() -> None:
    pool, release = blocked_pool()
    order: list[str] = []
    lane: JobLane[int] = JobLane(
        pool, 1, lambda batch: order.append(f"store {batch[0]}"), size=lambda job: 1, merge_up_to=1
    )
    lane.put(0)
    lane.put(1)
    pool.submit(0, lambda: order.append("load"))
    release.set()
    pool.shutdown()
    assert order == ["load", "store 0", "store 1"]


def test_a_batch_that_raises_does_not_stop_the_lane(caplog: pytest.LogCaptureFixture) -> None:
    pool, release = blocked_pool()
    ran: list[int] = []

    def run(batch: Sequence[int]) -> None:
        if batch[0] == 0:
            raise RuntimeError("boom")
        ran.extend(batch)

    lane = JobLane(pool, 1, run, size=lambda job: 1, merge_up_to=1)
    lane.put(0)
    lane.put(1)
    release.set()
    pool.shutdown()
    assert ran == [1]
    assert "boom" in caplog.text
