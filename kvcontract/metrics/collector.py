"""The collector that reads every source of one engine at each scrape, and the process's contract-violation source."""

from __future__ import annotations

from collections.abc import Iterator

from kvcontract.enforce import contract_violations
from kvcontract.metrics.sample import MetricSample, MetricsSource

__all__ = ["MetricsCollector", "contract_source"]


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
