"""Metrics: one collector interface for managers, tiers and workers, read when scraped.

Nothing is counted on the hot path for metrics' sake: a :class:`MetricsCollector` reads the
counters the components keep anyway (``stats()``) at scrape time, and a worker's transfers
are observed by :class:`MeteredWorker`, a decorator installed only when metrics are on.
Names follow vLLM's where vLLM has one (``vllm:kv_offload_*``), so its dashboards carry
over; kvcontract-only figures are ``kvcontract_*``. :mod:`kvcontract.prometheus` serves a
collector with ``prometheus-client`` (extra ``kvcontract[metrics]``).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from typing_extensions import override

from kvcontract.enforce import contract_violations
from kvcontract.managers import TierStats, TieringStats
from kvcontract.contracts import (
    GPULoadStoreSpec,
    LoadStoreSpec,
    ManagerStats,
    OffloadingManager,
    OffloadingWorker,
    TransferResult,
)

__all__ = [
    "TRANSFER_SIZE_BUCKETS",
    "MeteredWorker",
    "MetricSample",
    "MetricsCollector",
    "MetricsSource",
    "contract_source",
    "manager_samples",
    "manager_source",
    "tier_samples",
]

MetricKind = Literal["counter", "gauge", "histogram"]

TRANSFER_SIZE_BUCKETS = (1e6, 5e6, 10e6, 20e6, 40e6, 60e6, 80e6, 100e6, 150e6, 200e6)
"""Bucket bounds of the transfer size histograms, in bytes: vLLM's, so its dashboards match."""


@dataclass(frozen=True, slots=True)
class MetricSample:
    """One metric as read now: a counter's total, a gauge's value, or a histogram's buckets.

    ``name`` has no prefix: the collector adds ``vllm:`` to vLLM's names and ``kvcontract_``
    to the others, or the prefixes it was given.
    """

    name: str
    kind: MetricKind
    documentation: str
    value: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict[str, str])
    vllm_name: bool = False
    """Whether vLLM defines this metric (its prefix is then ``vllm:``)."""
    buckets: tuple[tuple[float, int], ...] = ()
    """For a histogram: cumulative counts per upper bound, the last bound ``inf``; ``value`` is the sum."""

    def prefixed_name(self, vllm_prefix: str = "vllm:", own_prefix: str = "kvcontract_") -> str:
        """``name`` with ``vllm_prefix`` if vLLM defines the metric, else ``own_prefix``."""
        return (vllm_prefix if self.vllm_name else own_prefix) + self.name


_BUSY_HELP = "Fraction of host offload blocks held by transfers in flight (0.0 idle, 1.0 saturated: stores may then find no room)."
_WRITE_HELP = "Fraction of host offload blocks held by stores in flight."
_READ_HELP = "Fraction of host offload blocks pinned by loads in flight."
_USAGE_HELP = "Fraction of host offload blocks holding a block (readable or in flight)."
_SKIPPED_HELP = "Blocks offered for storing that reuse admission kept out (offered too few times yet)."


MetricsSource = Callable[[], Iterator[MetricSample]]
"""Anything that reports metrics: called at each scrape, yields what it knows now."""


class MetricsCollector:
    """The sources of one engine's offloading, read together at each scrape."""

    def __init__(self, *, vllm_prefix: str = "vllm:", own_prefix: str = "kvcontract_") -> None:
        self.vllm_prefix = vllm_prefix
        self.own_prefix = own_prefix
        self._sources: list[MetricsSource] = [contract_source]
        """The process's contract violations are reported by every collector; components add their own."""

    def add(self, source: MetricsSource) -> None:
        """Report ``source``'s metrics from the next scrape on."""
        self._sources.append(source)

    def collect(self) -> list[MetricSample]:
        """Every source's metrics now, names prefixed."""
        return [
            MetricSample(
                sample.prefixed_name(self.vllm_prefix, self.own_prefix),
                sample.kind,
                sample.documentation,
                sample.value,
                sample.labels,
                sample.vllm_name,
                sample.buckets,
            )
            for source in self._sources
            for sample in source()
        ]


def contract_source() -> Iterator[MetricSample]:
    """The contract calls refused so far in this process (``kvcontract.enforce`` raised on them)."""
    yield MetricSample(
        "contract_violations_total",
        "counter",
        "Contract calls refused with a ContractViolation (a bad argument or return value).",
        contract_violations(),
    )


def manager_source(manager: OffloadingManager, *, policy: str = "") -> MetricsSource:
    """What ``manager.stats()`` knows (see :func:`manager_samples`), read at each scrape."""
    labels = {"policy": policy} if policy else {}

    def read() -> Iterator[MetricSample]:
        yield from manager_samples(manager.stats(), labels)

    return read


def manager_samples(stats: ManagerStats, labels: Mapping[str, str] | None = None) -> list[MetricSample]:
    """A manager's stats as metrics: host gauges, skipped stores, its counters, and each tier's.

    ``labels`` go on the manager's own counters. A tier's samples are labelled
    ``tier="<position>:<kind>"`` (``1:FileTier``), as vLLM labels its tiers, so two tiers of one
    kind stay apart.
    """
    samples = _host_gauges(stats)
    samples.append(MetricSample("kv_offload_stores_skipped", "counter", _SKIPPED_HELP, stats.skipped_stores, vllm_name=True))
    samples.extend(_manager_counters(stats, labels or {}))
    if isinstance(stats, TieringStats):
        for position, tier in enumerate(stats.tiers, start=1):
            samples.extend(tier_samples(tier, f"{position}:{tier.name}"))
    return samples


def _host_gauges(stats: ManagerStats) -> list[MetricSample]:
    """The host-memory gauges, each a fraction of capacity.

    vLLM's three count what transfers hold (not evictable now), as vLLM's CPU manager does;
    how full host memory is (which a warm cache always is) is kvcontract's own ``host_usage``.
    """
    capacity = stats.capacity or 1
    return [
        MetricSample("kv_offload_cpu_cache_usage_perc", "gauge", _BUSY_HELP, (stats.storing + stats.reading) / capacity, vllm_name=True),
        MetricSample("kv_offload_cpu_cache_write_usage_perc", "gauge", _WRITE_HELP, stats.storing / capacity, vllm_name=True),
        MetricSample("kv_offload_cpu_cache_read_usage_perc", "gauge", _READ_HELP, stats.reading / capacity, vllm_name=True),
        MetricSample("host_usage", "gauge", _USAGE_HELP, stats.used / capacity),
    ]


def _manager_counters(stats: ManagerStats, labels: Mapping[str, str]) -> Iterator[MetricSample]:
    for name, value, documentation in (
        ("hits", stats.hits, "Lookups that found the block readable in host memory."),
        ("misses", stats.misses, "Lookups that did not find the block readable in host memory."),
        ("evictions", stats.evicted, "Blocks evicted from host memory by the policy."),
        ("stored_blocks", stats.stored, "Blocks made readable in host memory."),
        ("loaded_blocks", stats.loaded, "Blocks loaded from host memory."),
        ("failed_store_blocks", stats.failed_stores, "Blocks not stored: no room in host memory, or their store failed."),
    ):
        yield MetricSample(name + "_total", "counter", documentation, value, labels)


def tier_samples(tier: TierStats, label: str) -> Iterator[MetricSample]:
    """The tiering family of one tier's stats, labelled ``tier=label``."""
    labels = {"tier": label}
    for name, value, documentation in (
        ("kv_offload_tiering_read_bytes", tier.bytes_read, "Bytes read from the secondary tier."),
        ("kv_offload_tiering_write_bytes", tier.bytes_written, "Bytes written to the secondary tier."),
        ("kv_offload_tiering_chunk_queries", tier.lookups, "Lookups that reached the secondary tier."),
        ("kv_offload_tiering_chunk_hits", tier.hits, "Lookups the secondary tier answered with a hit."),
        ("kv_offload_tiering_promotion_job_failures", tier.promotion_failures, "Failed promotion jobs."),
        ("kv_offload_tiering_cascade_job_failures", tier.cascade_failures, "Failed cascade (write) jobs."),
    ):
        yield MetricSample(name, "counter", documentation, value, labels, vllm_name=True)
    yield MetricSample(
        "checksum_failures_total",
        "counter",
        "Blocks read back from a secondary tier that failed their checksum "
        "(the file tier counts every failed check of a block file: checksum, header or length).",
        tier.checksum_failures,
        labels,
    )
    yield MetricSample(
        "identity_mismatches_total",
        "counter",
        "Values a secondary tier met that another block identity (model, layout, rank or namespace) wrote; "
        "each is a miss, never data.",
        tier.identity_mismatches,
        labels,
    )


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
        yield MetricSample(f"kv_offload_{direction}_bytes", "counter", f"Total bytes of {direction}s between GPU and host.", self.bytes, vllm_name=True)
        yield MetricSample(f"kv_offload_{direction}_time", "counter", f"Total {direction} time, in seconds.", self.seconds, vllm_name=True)
        cumulative: list[tuple[float, int]] = []
        total = 0
        for bound, count in zip((*TRANSFER_SIZE_BUCKETS, float("inf")), self.counts):
            total += count
            cumulative.append((bound, total))
        yield MetricSample(f"kv_offload_{direction}_size", "histogram", f"{direction.title()} job sizes, in bytes.", self.bytes, buckets=tuple(cumulative), vllm_name=True)


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
