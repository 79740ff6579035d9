"""Hits and blocks over the recent requests, in buckets, so a window costs a few numbers, not a list."""

from __future__ import annotations

from collections import deque

__all__ = ["WINDOW_BUCKETS", "RecentCounts"]

WINDOW_BUCKETS = 10
"""A window of ``n`` requests is counted in this many buckets of ``n / WINDOW_BUCKETS`` requests."""


class RecentCounts:
    """Hits and blocks of the last few buckets of requests, the bucket filling now included.

    Whoever counts the requests calls :meth:`rotate` when a bucket is full, so the window
    spans between 90 % and 100 % of its requests and costs 20 numbers.
    """

    def __init__(self) -> None:
        self._full: deque[tuple[float, float]] = deque(maxlen=WINDOW_BUCKETS - 1)
        self._hits = 0.0
        self._blocks = 0.0

    def add(self, hits: float, blocks: float) -> None:
        """Count one request's hits and blocks in the bucket filling now."""
        self._hits += hits
        self._blocks += blocks

    def rotate(self) -> None:
        """The bucket filling now is full: keep it, drop the oldest, start a new one."""
        self._full.append((self._hits, self._blocks))
        self._hits = self._blocks = 0.0

    def totals(self) -> tuple[float, float]:
        """Hits and blocks in the window."""
        return self._hits + sum(h for h, _ in self._full), self._blocks + sum(b for _, b in self._full)
