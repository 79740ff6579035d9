"""A thread pool that runs tasks by priority (lowest value first, FIFO within a priority).

Every tier queues its loads (``READ``) before its stores (``WRITE``), so loads never wait
behind a backlog of stores, and housekeeping (``BACKGROUND``) after both.
"""

from __future__ import annotations

import itertools
import logging
import queue
import sys
import threading
from collections.abc import Callable

__all__ = ["BACKGROUND", "READ", "WRITE", "PriorityThreadPool", "Task"]

READ = 0
WRITE = 1
BACKGROUND = 2
"""The tiers' priorities: loads, then stores, then touches, removals of bad values and health probes."""

_log = logging.getLogger(__name__)
_STOP = sys.maxsize
"""Priority of the stop markers: after every real task."""

Task = Callable[[], None]


class PriorityThreadPool:
    """Runs submitted callables on ``num_threads`` daemon threads, by priority then submission order."""

    def __init__(self, num_threads: int, name: str) -> None:
        if num_threads < 1:
            raise ValueError(f"a thread pool needs at least one thread, got num_threads={num_threads}")
        self._queue: queue.PriorityQueue[tuple[int, int, Task | None]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(num_threads)
        ]
        self._stopped = False
        for thread in self._threads:
            thread.start()

    def submit(self, priority: int, task: Task) -> None:
        """Queue ``task``; it runs before every queued task of a higher ``priority`` value."""
        if self._stopped:
            raise RuntimeError("the thread pool is shut down: submit tasks before shutdown()")
        self._queue.put((priority, next(self._order), task))

    def shutdown(self) -> None:
        """Run every queued task (and those they queue), then stop and join the threads."""
        if self._stopped:
            return
        for _ in self._threads:
            self._queue.put((_STOP, next(self._order), None))
        for thread in self._threads:
            thread.join()
        self._stopped = True

    def _run(self) -> None:
        while True:
            _, _, task = self._queue.get()
            if task is None:
                return
            try:
                task()
            except Exception:
                _log.exception("a task of thread pool %s failed", threading.current_thread().name)
