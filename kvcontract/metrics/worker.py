"""A worker's transfers as metrics: :class:`MeteredWorker` observes each finished job, installed only when metrics are on."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

from typing_extensions import override

from kvcontract.contracts import GPULoadStoreSpec, LoadStoreSpec, OffloadingWorker, TransferResult
from kvcontract.metrics.sample import MetricSample

__all__ = ["TRANSFER_SIZE_BUCKETS", "MeteredWorker"]

TRANSFER_SIZE_BUCKETS = (1e6, 5e6, 10e6, 20e6, 40e6, 60e6, 80e6, 100e6, 150e6, 200e6)
"""Bucket bounds of the transfer size histograms, in bytes: vLLM's, so its dashboards match."""


@dataclass
class _Transfers:
    """Totals of one direction and its size histogram (counts per bucket, the last unbounded)."""

    bytes: int = 0
    seconds: float = 0.0
    counts: list[int] = field(default_factory=lambda: [0] * (len(TRANSFER_SIZE_BUCKETS) + 1))

    def observe(self, result: TransferResult) -> None:
        self.bytes += result.transfer_bytes
        self.seconds += result.transfer_seconds
        self.counts[bisect.bisect_left(TRANSFER_SIZE_BUCKETS, result.transfer_bytes)] += 1

    def samples(self, direction: str) -> Iterator[MetricSample]:
        yield MetricSample(
            f"kv_offload_{direction}_bytes",
            "counter",
            f"Total bytes of {direction}s between GPU and host.",
            self.bytes,
            vllm_name=True,
        )
        yield MetricSample(
            f"kv_offload_{direction}_time",
            "counter",
            f"Total {direction} time, in seconds.",
            self.seconds,
            vllm_name=True,
        )
        cumulative: list[tuple[float, int]] = []
        total = 0
        for bound, count in zip((*TRANSFER_SIZE_BUCKETS, float("inf")), self.counts):
            total += count
            cumulative.append((bound, total))
        yield MetricSample(
            f"kv_offload_{direction}_size",
            "histogram",
            f"{direction.title()} job sizes, in bytes.",
            self.bytes,
            buckets=tuple(cumulative),
            vllm_name=True,
        )


class MeteredWorker(OffloadingWorker):
    """Forwards to ``inner`` and observes each finished job's bytes and time for the metrics."""

    def __init__(self, inner: OffloadingWorker) -> None:
        self._inner = inner
        self._directions: dict[int, str] = {}
        self._totals = {"store": _Transfers(), "load": _Transfers()}
        self._failed = 0
        self._lock = threading.Lock()

    @override
    def submit_store(self, job_id: int, src: GPULoadStoreSpec, dst: LoadStoreSpec) -> bool:
        return self._submitted(job_id, "store", self._inner.submit_store(job_id, src, dst))

    @override
    def submit_load(self, job_id: int, src: LoadStoreSpec, dst: GPULoadStoreSpec) -> bool:
        return self._submitted(job_id, "load", self._inner.submit_load(job_id, src, dst))

    def _submitted(self, job_id: int, direction: str, accepted: bool) -> bool:
        """Remember an accepted job's direction until it finishes; a refused one is never reported."""
        if accepted:
            with self._lock:
                self._directions[job_id] = direction
        return accepted

    @property
    def pending_jobs(self) -> int:
        """Accepted jobs not yet reported finished."""
        return len(self._directions)

    @override
    def get_finished(self) -> list[TransferResult]:
        finished = self._inner.get_finished()
        with self._lock:
            for result in finished:
                direction = self._directions.pop(result.job_id, None)
                if direction is None:
                    continue
                if result.success:
                    self._totals[direction].observe(result)
                else:
                    self._failed += 1
        return finished

    @override
    def wait(self, job_ids: Collection[int]) -> None:
        self._inner.wait(job_ids)

    @override
    def shutdown(self) -> None:
        self._inner.shutdown()

    def source(self) -> Iterator[MetricSample]:
        """This worker's metrics: a :data:`MetricsSource`."""
        with self._lock:
            samples = [sample for direction, totals in self._totals.items() for sample in totals.samples(direction)]
            failed = self._failed
        yield from samples
        yield MetricSample("failed_transfers_total", "counter", "Transfer jobs that failed.", failed)
