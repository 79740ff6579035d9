"""The copy-engine interface the worker drives, and the two directions a job can go."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from enum import Enum

from kvcontract.contracts import TransferResult
from kvcontract.transfer.mapping import BlockMapping

__all__ = ["CopyEngine", "Direction"]


class Direction(Enum):
    """Which way a job copies."""

    STORE = "store"
    """GPU blocks to host blocks."""
    LOAD = "load"
    """Host blocks to GPU blocks."""


class CopyEngine(ABC):
    """Runs copy jobs in the background; jobs of one direction finish in submission order."""

    @property
    @abstractmethod
    def name(self) -> str:
        """How this engine copies, for logs and benchmarks."""

    @abstractmethod
    def submit(self, job_id: int, direction: Direction, mapping: BlockMapping) -> None:
        """Start copying the pairs of ``mapping``; returns without waiting for the copy."""

    @abstractmethod
    def finished(self) -> list[TransferResult]:
        """Jobs finished since the last call, each once."""

    @abstractmethod
    def wait(self, job_ids: Collection[int]) -> None:
        """Block until none of ``job_ids`` is running; ids not running return at once."""

    @abstractmethod
    def shutdown(self) -> None:
        """Finish the submitted jobs and stop."""
