"""The worker-side contract: the engine process that moves block bytes between media."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Collection
from typing import Protocol

from kvcontract.contracts.base import Contract
from kvcontract.contracts.specs import GPULoadStoreSpec, LoadStoreSpec
from kvcontract.contracts.values import TransferResult

__all__ = ["OffloadingWorker"]


class OffloadingWorker(Contract, Protocol):
    """Runs transfer jobs asynchronously; submits never block."""

    @abstractmethod
    def submit_store(self, job_id: int, src: GPULoadStoreSpec, dst: LoadStoreSpec) -> bool:
        """Start copying GPU blocks ``src`` to ``dst``; ``False`` if it cannot start."""

    @abstractmethod
    def submit_load(self, job_id: int, src: LoadStoreSpec, dst: GPULoadStoreSpec) -> bool:
        """Start copying ``src`` into GPU blocks ``dst``; ``False`` if it cannot start."""

    @abstractmethod
    def get_finished(self) -> list[TransferResult]:
        """Jobs finished since the last call, each reported once."""

    @abstractmethod
    def wait(self, job_ids: Collection[int]) -> None:
        """Block until every job in ``job_ids`` has finished."""

    def shutdown(self) -> None:
        """Finish or cancel in-flight jobs and release resources."""
        return None
