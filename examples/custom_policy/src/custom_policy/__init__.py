"""An example of a downstream kvcontract package: a FIFO policy and a metrics decorator."""

from custom_policy.fifo import FIFOPolicy
from custom_policy.metrics import MetricsManager, RequestMetrics

__all__ = ["FIFOPolicy", "MetricsManager", "RequestMetrics"]
