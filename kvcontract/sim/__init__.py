"""Simulation: reading traces and replaying them through a manager."""

from kvcontract.engine_driver.keys import block_key
from kvcontract.sim.replay import HasHashIds, ReplayReport, replay
from kvcontract.sim.trace import TraceFormatError, TraceRequest, iter_trace, read_trace

__all__ = [
    "HasHashIds",
    "ReplayReport",
    "TraceFormatError",
    "TraceRequest",
    "block_key",
    "iter_trace",
    "read_trace",
    "replay",
]
