"""Scheduler-side managers: host memory with an eviction policy, store admission by reuse, tiering.

:class:`ForwardingManager` is the base of manager decorators; managers that evict on their
own report it through :class:`ReportsEvictions`.
"""

from kvcontract.managers.cpu import CPUOffloadingManager
from kvcontract.managers.evictions import EvictionListener, ReportsEvictions
from kvcontract.managers.forwarding import ForwardingManager
from kvcontract.managers.reuse_filter import FilterReusedOffloadingManager
from kvcontract.managers.tiering import TieringOffloadingManager, TieringStats, TierStats

__all__ = [
    "CPUOffloadingManager",
    "EvictionListener",
    "FilterReusedOffloadingManager",
    "ForwardingManager",
    "ReportsEvictions",
    "TierStats",
    "TieringOffloadingManager",
    "TieringStats",
]
