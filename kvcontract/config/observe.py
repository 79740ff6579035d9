"""The live what-if's settings (``observe.whatif``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
    field_validator,
)

from kvcontract.config.base import ConfigModel
from kvcontract.config.limits import ConfigLimits
from kvcontract.config.policy import PolicyConfig

BUILTIN_POLICIES = ("lru", "arc", "s3fifo", "sieve", "prefix_reuse")
"""The policies kvcontract ships: the what-if observer compares all of them by default."""


class WhatIfConfig(ConfigModel):
    """The live what-if: hit ratios at other capacities and under other policies, from sampled shadows.

    ``capacities`` are multiples of the primary's capacity (numbers, never strings or booleans,
    each leaving a shadow of one block or more); ``sample_rate`` is the fraction of
    blocks the shadows see (1.0 is exact); the recent window spans ``window_requests`` requests.
    """

    capacities: list[Annotated[float, Field(strict=True, gt=0, le=ConfigLimits.MAX_WHATIF_MULTIPLIER)]] = Field(
        default_factory=lambda: [0.5, 2.0, 4.0], max_length=ConfigLimits.MAX_WHATIF_SHADOWS
    )
    policies: list[PolicyConfig] = Field(
        default_factory=lambda: [PolicyConfig(kind=name) for name in BUILTIN_POLICIES],
        max_length=ConfigLimits.MAX_WHATIF_SHADOWS,
    )
    sample_rate: float = Field(default=0.01, gt=0, le=1)
    window_requests: int = Field(default=10_000, ge=10, le=ConfigLimits.MAX_TRACKER_SIZE)

    @field_validator("capacities")
    @classmethod
    def _distinct_capacities(cls, capacities: list[float]) -> list[float]:
        if len(set(capacities)) != len(capacities):
            raise ValueError(f"each multiple once: {capacities}")
        return capacities

    @field_validator("policies")
    @classmethod
    def _distinct_policies(cls, policies: list[PolicyConfig]) -> list[PolicyConfig]:
        names = [policy.kind for policy in policies]
        if len(set(names)) != len(names):
            raise ValueError(f"each policy once: {names}")
        return policies


class ObserveConfig(ConfigModel):
    """What kvcontract watches beside the primary manager while it serves; off by default, costing nothing."""

    whatif: WhatIfConfig | None = None
