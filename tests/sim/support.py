"""The Mooncake conversation trace the package ships, as the tests read it."""

from __future__ import annotations

from kvcontract.sim.shipped import shipped_trace

TRACE = shipped_trace("mooncake-conversation")
"""The conversation trace of the Mooncake FAST'25 release (gzip), from the package's data."""
