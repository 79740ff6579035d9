"""Metrics: one collector interface for managers, tiers and workers, read when scraped.

Nothing is counted on the hot path for metrics' sake: a :class:`MetricsCollector` reads the
counters the components keep anyway (``stats()``) at scrape time, and a worker's transfers
are observed by :class:`MeteredWorker`, a decorator installed only when metrics are on.
Names follow vLLM's where vLLM has one (``vllm:kv_offload_*``), so its dashboards carry
over; kvcontract-only figures are ``kvcontract_*``. :mod:`kvcontract.metrics.prometheus` serves a
collector with ``prometheus-client`` (extra ``kvcontract[metrics]``).
"""

from kvcontract.metrics.collector import MetricsCollector, contract_source
from kvcontract.metrics.manager import manager_samples, manager_source, tier_samples
from kvcontract.metrics.sample import MetricSample, MetricsSource
from kvcontract.metrics.worker import TRANSFER_SIZE_BUCKETS, MeteredWorker

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
