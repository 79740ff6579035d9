"""Shared helpers of the metrics tests: reading one sample, and the marker for tests that need Redis."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from kvcontract.metrics import MetricsCollector
from tests.tiers.redis.support import missing_reason, required

needs_redis = pytest.mark.skipif(
    missing_reason() is not None and not required(), reason=missing_reason() or "Redis parts are missing"
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
