"""What the simulator lets watch it: an observer of each request's keys, and what it reports back.

The simulator knows no observer but this protocol, so the what-if (``kvcontract.observe``)
sits above it and the simulator never imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kvcontract.contracts import OffloadKey

__all__ = ["RequestObserver", "WhatIfSummary"]


@dataclass(frozen=True, slots=True)
class WhatIfSummary:
    """The what-if's figures over a whole run, as ``simulate --json`` writes them."""

    capacity: dict[str, float]
    """Multiple of the primary's capacity (``"2"``) to the hit ratio there."""
    policy: dict[str, float]
    """Policy name to its hit ratio at the primary's capacity."""
    current: float
    """The primary's own policy and capacity on the same sample: the base of the deltas."""
    sample_rate: float
    """The rate the shadows saw: the config's, or higher where the smallest shadow needs it."""
    requested_rate: float = 1.0
    """The config's ``observe.whatif.sample_rate``."""
    errors: dict[str, float] | None = None
    """Each figure's standard error from sampling (``current``, ``capacity <multiple>``, ``policy <name>``)."""


class RequestObserver(Protocol):
    """Sees every request's prefix keys, in order, and sums up what it learned."""

    def observe(self, keys: Sequence[OffloadKey]) -> None:
        """One request's keys, as the primary was asked for them."""
        ...

    def summary(self) -> WhatIfSummary:
        """What it learned over the run so far."""
        ...
