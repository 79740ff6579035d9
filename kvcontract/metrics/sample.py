"""One metric as a component reports it, and what reports metrics: the vocabulary of :mod:`kvcontract.metrics`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["MetricKind", "MetricSample", "MetricsSource"]

MetricKind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True, slots=True)
class MetricSample:
    """One metric as read now: a counter's total, a gauge's value, or a histogram's buckets.

    ``name`` has no prefix: the collector adds ``vllm:`` to vLLM's names and ``kvcontract_``
    to the others, or the prefixes it was given.
    """

    name: str
    kind: MetricKind
    documentation: str
    value: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict[str, str])
    vllm_name: bool = False
    """Whether vLLM defines this metric (its prefix is then ``vllm:``)."""
    buckets: tuple[tuple[float, int], ...] = ()
    """For a histogram: cumulative counts per upper bound, the last bound ``inf``; ``value`` is the sum."""

    def prefixed_name(self, vllm_prefix: str = "vllm:", own_prefix: str = "kvcontract_") -> str:
        """``name`` with ``vllm_prefix`` if vLLM defines the metric, else ``own_prefix``."""
        return (vllm_prefix if self.vllm_name else own_prefix) + self.name


MetricsSource = Callable[[], Iterator[MetricSample]]
"""Anything that reports metrics: called at each scrape, yields what it knows now."""
