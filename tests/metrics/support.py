"""Shared helpers of the metrics tests: reading one sample, a real scrape, and the marker for tests that need Redis."""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pytest

from kvcontract.metrics import MetricsCollector
from tests.required_parts import required
from tests.tiers.redis.support import missing_reason

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

needs_redis = pytest.mark.skipif(
    missing_reason() is not None and not required("redis"), reason=missing_reason() or "Redis parts are missing"
)
"""Skips without redis-server or redis-py, unless ``KVCONTRACT_REQUIRE=redis`` makes that a failure."""


def value_of(collector: MetricsCollector, name: str, labels: Mapping[str, str] | None = None) -> float:
    """The value of the one sample named ``name`` (with ``labels``) the collector reads now."""
    values = [
        sample.value
        for sample in collector.collect()
        if sample.name == name and (labels is None or dict(sample.labels) == dict(labels))
    ]
    assert len(values) == 1, f"expected one sample {name} {labels or ''}, found {len(values)}"
    return values[0]


def scrape(collector: MetricsCollector) -> dict[str, Metric]:
    """The metric families a real Prometheus scrape of ``collector`` over loopback reads, by name (skips without prometheus-client)."""
    parser = pytest.importorskip(
        "prometheus_client.parser", reason="prometheus-client not installed (extra kvcontract[metrics])"
    )
    from kvcontract.metrics.prometheus import serve_metrics

    server = serve_metrics(collector, 0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as response:
            text = response.read().decode()
    finally:
        server.stop()
    return {family.name: family for family in parser.text_string_to_metric_families(text)}
