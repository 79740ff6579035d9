"""kvcontract's manager counters as vLLM's offloading stats, and the Prometheus metrics they feed.

vLLM asks the manager for stats every scheduler step and sums counters across steps, so
each call reports what changed since the previous one. The host-memory gauges are
:func:`kvcontract.metrics.host_gauges`, under vLLM's names with vLLM's meaning (the
fraction of host blocks transfers hold, as its CPU manager reports them), so dashboards
carry over; how full host memory is, and the counters vLLM has no name for, are
``kvcontract_*``, in offload blocks. Reuse admission's skipped blocks count on vLLM's
``vllm:kv_offload_stores_skipped``.
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
from kvcontract.metrics import SKIPPED_STORES_HELP, host_gauges

__all__ = ["COUNTERS", "StatsReporter", "metric_definitions"]

COUNTERS: dict[str, str] = {
    "kvcontract_hits": "Offload lookups answered HIT by the kvcontract manager.",
    "kvcontract_misses": "Offload lookups answered MISS or HIT_PENDING by the kvcontract manager.",
    "kvcontract_stored_blocks": "Offload blocks whose store completed.",
    "kvcontract_loaded_blocks": "Offload blocks whose load completed.",
    "kvcontract_evicted_blocks": "Offload blocks evicted from host memory.",
    "kvcontract_failed_store_blocks": "Offload blocks whose store found no room or failed.",
    CPUOffloadingMetrics.STORES_SKIPPED: SKIPPED_STORES_HELP,
}
"""The counters by metric name, with their help text."""

_EMPTY = ManagerStats(capacity=1, used=0)
"""A manager's stats before any call: its gauges name and describe the gauges of every report."""


def metric_definitions() -> dict[str, OffloadingMetricMetadata]:
    """The metrics :class:`StatsReporter` fills, as vLLM's Prometheus exporter declares them."""
    definitions: dict[str, OffloadingMetricMetadata] = {
        gauge.prefixed_name(): OffloadingGaugeMetadata(documentation=gauge.documentation) for gauge in host_gauges(_EMPTY)
    }
    definitions.update({name: OffloadingCounterMetadata(documentation=text) for name, text in COUNTERS.items()})
    return definitions


def _counts(stats: ManagerStats) -> tuple[int, ...]:
    return (
        stats.hits,
        stats.misses,
        stats.stored,
        stats.loaded,
        stats.evicted,
        stats.failed_stores,
        stats.skipped_stores,
    )


@dataclass
class StatsReporter:
    """Turns successive :class:`ManagerStats` snapshots into vLLM stats of what changed in between."""

    _last: tuple[int, ...] = (0,) * len(COUNTERS)

    def report(self, stats: ManagerStats) -> OffloadingConnectorStats:
        """The gauges now and each counter's increase since the previous report."""
        counts = _counts(stats)
        out = OffloadingConnectorStats()
        for gauge in host_gauges(stats):
            out.set_gauge(gauge.prefixed_name(), gauge.value)
        for name, now, before in zip(COUNTERS, counts, self._last):
            if now != before:
                out.increase_counter(name, now - before)
        self._last = counts
        return out
