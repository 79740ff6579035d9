"""Prometheus export of a :class:`~kvcontract.metrics.MetricsCollector` (extra ``kvcontract[metrics]``).

The collector is read at each scrape, so serving metrics costs the engine nothing between
scrapes. ``prometheus-client`` is imported here only, never by ``import kvcontract``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvcontract.extras import MissingExtraError
from kvcontract.metrics.collector import MetricsCollector

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

__all__ = ["MetricsServer", "MissingExtraError", "registry_for", "serve_metrics"]


def _client() -> None:
    try:
        importlib.import_module("prometheus_client")
    except ImportError:
        raise MissingExtraError(
            "metrics need prometheus-client: pip install 'kvcontract[metrics]'", extra="metrics"
        ) from None


class _Bridge:
    """A prometheus-client collector that reads ``collector`` at each scrape."""

    def __init__(self, collector: MetricsCollector) -> None:
        self._collector = collector

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        kinds = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily, "histogram": HistogramMetricFamily}
        families: dict[str, CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily] = {}
        for sample in self._collector.collect():
            labels = dict(sample.labels)
            family = families.get(sample.name)
            if family is None:
                family = kinds[sample.kind](sample.name, sample.documentation, labels=list(labels))
                families[sample.name] = family
            if isinstance(family, HistogramMetricFamily):
                buckets = [("+Inf" if bound == float("inf") else str(bound), count) for bound, count in sample.buckets]
                family.add_metric(list(labels.values()), buckets, sample.value)
            else:
                family.add_metric(list(labels.values()), sample.value)
        yield from families.values()


def registry_for(collector: MetricsCollector) -> CollectorRegistry:
    """A Prometheus registry of its own that exports ``collector``."""
    _client()
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Bridge(collector))
    return registry


@dataclass(frozen=True, slots=True)
class MetricsServer:
    """A running metrics endpoint: the port it listens on (useful when 0 was asked) and how to stop it."""

    port: int
    stop: Callable[[], None]


def serve_metrics(collector: MetricsCollector, port: int, address: str = "127.0.0.1") -> MetricsServer:
    """Serve ``collector`` at ``http://address:port/metrics`` from a background thread; port 0 picks a free one."""
    registry = registry_for(collector)
    from prometheus_client import start_http_server

    server, thread = start_http_server(port, addr=address, registry=registry)

    def stop() -> None:
        server.shutdown()
        thread.join()
        server.server_close()  # the listening socket: shutdown() only ends the serving loop

    return MetricsServer(server.server_port, stop)
