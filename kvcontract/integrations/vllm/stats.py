"""kvcontract's manager metrics as vLLM's offloading stats, and the Prometheus metrics they feed.

What the adapter reports is what :func:`kvcontract.metrics.manager_samples` reads from the
manager's stats, the same metrics ``kvcontract simulate --metrics-port`` serves: vLLM's
names with vLLM's meaning where vLLM has one (the host gauges, skipped stores, the tiering
family per tier), ``kvcontract_*`` for the rest. vLLM asks for stats every scheduler step
and sums counters across steps, so each call reports gauges as they are and each
counter's increase since the previous call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm.distributed.kv_transfer.kv_connector.v1.offloading.metrics import OffloadingConnectorStats
from vllm.v1.kv_offload.base import (
    OffloadingCounterMetadata,
    OffloadingGaugeMetadata,
    OffloadingMetricMetadata,
)

from kvcontract.config import WhatIfConfig
from kvcontract.contracts import ManagerStats
from kvcontract.managers import TieringStats, TierStats
from kvcontract.metrics import manager_samples
from kvcontract.observe import WhatIfObserver

__all__ = ["StatsReporter", "metric_definitions"]

_EVERY_METRIC = TieringStats(capacity=1, used=0, tiers=(TierStats("tier"),))
"""Stats with one tier: their samples name every metric a report can hold, with its labels."""
_EVERY_WHATIF = WhatIfConfig.model_validate({"capacities": [2.0], "policies": ["lru"]})
"""A what-if config whose observer's samples name every what-if gauge, with its labels (declared whether or not one runs)."""


def metric_definitions() -> dict[str, OffloadingMetricMetadata]:
    """The metrics :class:`StatsReporter` fills, as vLLM's Prometheus exporter declares them."""
    definitions: dict[str, OffloadingMetricMetadata] = {}
    whatif = WhatIfObserver(1, "lru", _EVERY_WHATIF)  # built here, not at import: vLLM asks once per spec
    for sample in [*manager_samples(_EVERY_METRIC), *whatif.source()]:
        kind = OffloadingGaugeMetadata if sample.kind == "gauge" else OffloadingCounterMetadata
        definitions[sample.prefixed_name()] = kind(documentation=sample.documentation, labelnames=tuple(sample.labels))
    return definitions


@dataclass
class StatsReporter:
    """Turns successive :class:`ManagerStats` snapshots into vLLM stats of what changed in between."""

    _last: dict[tuple[str, tuple[str, ...]], float] = field(default_factory=dict[tuple[str, tuple[str, ...]], float])

    def report(self, stats: ManagerStats, observer: WhatIfObserver | None = None) -> OffloadingConnectorStats:
        """The gauges now and each counter's increase since the previous report, with the what-if's gauges."""
        out = OffloadingConnectorStats()
        samples = manager_samples(stats)
        if observer is not None:
            samples.extend(observer.source())
        for sample in samples:
            name, labels = sample.prefixed_name(), tuple(sample.labels.values())
            if sample.kind == "gauge":
                out.set_gauge(name, sample.value, labels)
                continue
            before = self._last.get((name, labels), 0)
            if sample.value != before:
                out.increase_counter(name, sample.value - before, labels)
                self._last[name, labels] = sample.value
        return out
