"""kvcontract's manager counters as vLLM's offloading stats, and the Prometheus metrics they feed.

vLLM asks the manager for stats every scheduler step and sums counters across steps, so
each call reports what changed since the previous one. The host-memory fill shares vLLM's
own gauge name (``vllm:kv_offload_cpu_cache_usage_perc``), so dashboards carry over;
the counters vLLM has no name for are ``kvcontract_*``, in offload blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm.distributed.kv_transfer.kv_connector.v1.offloading.metrics import OffloadingConnectorStats
from vllm.v1.kv_offload.base import (
    OffloadingCounterMetadata,
    OffloadingGaugeMetadata,
    OffloadingMetricMetadata,
)
from vllm.v1.kv_offload.cpu.common import CPUOffloadingMetrics

from kvcontract.contracts import ManagerStats

__all__ = ["COUNTERS", "USAGE_GAUGE", "StatsReporter", "metric_definitions"]

USAGE_GAUGE: str = CPUOffloadingMetrics.CPU_CACHE_USAGE_PERC
"""vLLM's gauge of host-memory use, 0.0 to 1.0: kvcontract's ``used / capacity``."""

COUNTERS: dict[str, str] = {
    "kvcontract_hits": "Offload lookups answered HIT by the kvcontract manager.",
    "kvcontract_misses": "Offload lookups answered MISS or HIT_PENDING by the kvcontract manager.",
    "kvcontract_stored_blocks": "Offload blocks whose store completed.",
    "kvcontract_loaded_blocks": "Offload blocks whose load completed.",
    "kvcontract_evicted_blocks": "Offload blocks evicted from host memory.",
    "kvcontract_failed_store_blocks": "Offload blocks whose store found no room or failed.",
}
"""kvcontract's counters by metric name, with their help text."""


def metric_definitions() -> dict[str, OffloadingMetricMetadata]:
    """The metrics :class:`StatsReporter` fills, as vLLM's Prometheus exporter declares them."""
    definitions: dict[str, OffloadingMetricMetadata] = {
        USAGE_GAUGE: OffloadingGaugeMetadata(documentation="Fraction of the kvcontract host-memory pool in use."),
    }
    definitions.update({name: OffloadingCounterMetadata(documentation=text) for name, text in COUNTERS.items()})
    return definitions


def _counts(stats: ManagerStats) -> tuple[int, ...]:
    return (stats.hits, stats.misses, stats.stored, stats.loaded, stats.evicted, stats.failed_stores)


@dataclass
class StatsReporter:
    """Turns successive :class:`ManagerStats` snapshots into vLLM stats of what changed in between."""

    _last: tuple[int, ...] = (0, 0, 0, 0, 0, 0)

    def report(self, stats: ManagerStats) -> OffloadingConnectorStats:
        """The gauge now and each counter's increase since the previous report."""
        counts = _counts(stats)
        out = OffloadingConnectorStats()
        out.set_gauge(USAGE_GAUGE, stats.used / stats.capacity if stats.capacity else 0.0)
        for name, now, before in zip(COUNTERS, counts, self._last):
            if now != before:
                out.increase_counter(name, now - before)
        self._last = counts
        return out
