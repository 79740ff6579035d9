"""Scheduler-side managers: host memory with an eviction policy, store admission by reuse, tiering."""

from kvcontract.managers.cpu import CPUOffloadingManager
from kvcontract.managers.reuse_filter import FilterReusedOffloadingManager
from kvcontract.managers.tiering import TierStats, TieringOffloadingManager, TieringStats

__all__ = [
    "CPUOffloadingManager",
    "FilterReusedOffloadingManager",
    "TierStats",
    "TieringOffloadingManager",
    "TieringStats",
]
