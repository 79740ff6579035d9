"""The priority thread pool: lower priority values first, FIFO within one, drains on shutdown."""

from __future__ import annotations

import functools
import threading

import pytest

from kvcontract.tiers.io_pool import PriorityThreadPool


def blocked_pool() -> tuple[PriorityThreadPool, threading.Event]:
    """A one-thread pool whose thread waits on the returned event before taking more tasks."""
    pool = PriorityThreadPool(1, name="test")
    release = threading.Event()
    started = threading.Event()

    def hold() -> None:
        started.set()
        release.wait()

    pool.submit(0, hold)
    started.wait()
    return pool, release


def test_lower_priority_values_run_first_in_submission_order() -> None:
    pool, release = blocked_pool()
    order: list[str] = []
    for name, priority in [("w1", 1), ("r1", 0), ("w2", 1), ("r2", 0)]:
        pool.submit(priority, functools.partial(order.append, name))
    release.set()
    pool.shutdown()
    assert order == ["r1", "r2", "w1", "w2"]


def test_shutdown_runs_tasks_queued_by_tasks() -> None:
    pool, release = blocked_pool()
    ran: list[int] = []

    def spawn() -> None:
        pool.submit(5, lambda: ran.append(2))
        ran.append(1)

    pool.submit(1, spawn)
    release.set()
    pool.shutdown()
    assert ran == [1, 2]


def test_a_failing_task_does_not_stop_its_thread(caplog: pytest.LogCaptureFixture) -> None:
    pool = PriorityThreadPool(1, name="test")
    ran: list[bool] = []

    def fail() -> None:
        raise RuntimeError("boom")

    pool.submit(0, fail)
    pool.submit(0, lambda: ran.append(True))
    pool.shutdown()
    assert ran == [True]
    assert "boom" in caplog.text


def test_submit_after_shutdown_is_an_error_and_shutdown_is_idempotent() -> None:
    pool = PriorityThreadPool(2, name="test")
    pool.shutdown()
    pool.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(0, lambda: None)


def test_needs_a_thread() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        PriorityThreadPool(0, name="test")
