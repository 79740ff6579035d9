"""A manager's and its tiers' stats as metrics, under vLLM's names where vLLM has them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from kvcontract.contracts import ManagerStats, OffloadingManager
from kvcontract.managers import TieringStats, TierStats
from kvcontract.metrics.sample import MetricSample, MetricsSource

__all__ = ["manager_samples", "manager_source", "tier_samples"]

_BUSY_HELP = "Fraction of host offload blocks held by transfers in flight (0.0 idle, 1.0 saturated: stores may then find no room)."
_WRITE_HELP = "Fraction of host offload blocks held by stores in flight."
_READ_HELP = "Fraction of host offload blocks pinned by loads in flight."
_USAGE_HELP = "Fraction of host offload blocks holding a block (readable or in flight)."
_SKIPPED_HELP = "Blocks offered for storing that reuse admission kept out (offered too few times yet)."


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
    samples.append(
        MetricSample("kv_offload_stores_skipped", "counter", _SKIPPED_HELP, stats.skipped_stores, vllm_name=True)
    )
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
        MetricSample(
            "kv_offload_cpu_cache_usage_perc",
            "gauge",
            _BUSY_HELP,
            (stats.storing + stats.reading) / capacity,
            vllm_name=True,
        ),
        MetricSample(
            "kv_offload_cpu_cache_write_usage_perc", "gauge", _WRITE_HELP, stats.storing / capacity, vllm_name=True
        ),
        MetricSample(
            "kv_offload_cpu_cache_read_usage_perc", "gauge", _READ_HELP, stats.reading / capacity, vllm_name=True
        ),
        MetricSample("host_usage", "gauge", _USAGE_HELP, stats.used / capacity),
    ]


def _manager_counters(stats: ManagerStats, labels: Mapping[str, str]) -> Iterator[MetricSample]:
    return _counters(
        (
            ("hits", stats.hits, "Lookups that found the block readable in host memory."),
            ("misses", stats.misses, "Lookups that did not find the block readable in host memory."),
            ("evictions", stats.evicted, "Blocks evicted from host memory by the policy."),
            ("stored_blocks", stats.stored, "Blocks made readable in host memory."),
            ("loaded_blocks", stats.loaded, "Blocks loaded from host memory."),
            (
                "failed_store_blocks",
                stats.failed_stores,
                "Blocks not stored: no room in host memory, or their store failed.",
            ),
        ),
        labels,
        vllm=False,
    )


def _counters(rows: Iterable[tuple[str, int, str]], labels: Mapping[str, str], *, vllm: bool) -> Iterator[MetricSample]:
    """Counters of ``(name, value, help)`` rows: vLLM's names as vLLM spells them, kvcontract's with ``_total``."""
    for name, value, documentation in rows:
        yield MetricSample(name if vllm else name + "_total", "counter", documentation, value, labels, vllm_name=vllm)


def tier_samples(tier: TierStats, label: str) -> Iterator[MetricSample]:
    """The tiering family of one tier's stats, labelled ``tier=label``."""
    labels = {"tier": label}
    yield from _counters(
        (
            ("kv_offload_tiering_read_bytes", tier.bytes_read, "Bytes read from the secondary tier."),
            ("kv_offload_tiering_write_bytes", tier.bytes_written, "Bytes written to the secondary tier."),
            ("kv_offload_tiering_chunk_queries", tier.lookups, "Lookups that reached the secondary tier."),
            ("kv_offload_tiering_chunk_hits", tier.hits, "Lookups the secondary tier answered with a hit."),
            ("kv_offload_tiering_promotion_job_failures", tier.promotion_failures, "Failed promotion jobs."),
            ("kv_offload_tiering_cascade_job_failures", tier.cascade_failures, "Failed cascade (write) jobs."),
        ),
        labels,
        vllm=True,
    )
    yield from _counters(
        (
            (
                "skipped_cascades",
                tier.skipped_cascades,
                "Blocks not written to a secondary tier because cascades in flight already pinned their share "
                "of host memory.",
            ),
            (
                "checksum_failures",
                tier.checksum_failures,
                "Blocks read back from a secondary tier that failed their checksum "
                "(the file tier counts every failed check of a block file: checksum, header or length).",
            ),
            (
                "identity_mismatches",
                tier.identity_mismatches,
                "Values a secondary tier met that another block identity (model, layout, rank or namespace) "
                "wrote; each is a miss, never data.",
            ),
            (
                "forged_values",
                tier.forged_values,
                "Values a secondary tier with an integrity key met whose MAC did not hold (written without the "
                "key, with another, or altered); each is a miss, never data.",
            ),
        ),
        labels,
        vllm=False,
    )
