"""The bookkeeping every kvcontract tier shares: its host blocks and identity checked once, its jobs, events and shutdown.

The file tier and the remote tiers differ in where a block goes, not in how a job is claimed,
reported and handed back, nor in how the tier stops; those live here once.
"""

from __future__ import annotations

import threading
from abc import abstractmethod

import torch
from typing_extensions import override

from kvcontract.contracts.identity import BlockIdentity
from kvcontract.contracts.tier import SecondaryTier, TierJob
from kvcontract.contracts.values import OffloadingEvent, TransferResult
from kvcontract.tiers.event_log import EventLog
from kvcontract.tiers.host_blocks import check_host_block_ids, check_host_blocks, check_identity_block_bytes
from kvcontract.tiers.integrity import ValueMac
from kvcontract.tiers.io_pool import PriorityThreadPool

__all__ = ["TierBase"]


class TierBase(SecondaryTier):
    """A tier that moves blocks between ``host_blocks`` and its medium on I/O threads.

    The constructor refuses host blocks that are not the identity's rows; a subclass sets
    ``_pool`` last in its own constructor and says in :meth:`_release` what else shutdown frees.
    ``where`` names the medium in errors (a directory, a server address).
    """

    _pool: PriorityThreadPool
    """The I/O threads that run the jobs, loads before stores; stopped by :meth:`shutdown`."""

    def __init__(
        self,
        host_blocks: torch.Tensor,
        *,
        identity: BlockIdentity,
        mac: ValueMac | None,
        medium: str,
        where: str,
        enable_events: bool,
    ) -> None:
        tier = type(self).__name__
        check_host_blocks(host_blocks, tier)
        check_identity_block_bytes(identity, host_blocks, tier)
        self._host = host_blocks
        self._rows = host_blocks.numpy()
        self._block_bytes = int(host_blocks.shape[1])
        self._identity = identity
        self._fingerprint = identity.fingerprint
        self._mac = mac
        self._where = where
        self._lock = threading.Lock()
        self._events = EventLog(medium, enabled=enable_events)
        self._finished: list[TransferResult] = []
        self._active_jobs: set[int] = set()
        self._closed = False

    @property
    def identity(self) -> BlockIdentity:
        """The block identity whose blocks this tier reads and writes."""
        return self._identity

    @override
    def get_finished(self) -> list[TransferResult]:
        """Jobs finished since the last call, each once, with bytes moved and seconds of I/O."""
        with self._lock:
            finished, self._finished = self._finished, []
        return finished

    @override
    def take_events(self) -> list[OffloadingEvent]:
        """Blocks the tier gained (stored, found at start) and lost (evicted, gone, bad) since the last call (none unless ``enable_events``)."""
        return self._events.take()

    @override
    def shutdown(self) -> None:
        """Refuse new jobs, finish those in flight, stop the I/O threads and release the medium; once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.shutdown()
        self._release()

    @abstractmethod
    def _release(self) -> None:
        """What shutdown frees once the I/O threads stopped (a directory, a connection)."""

    def _check_job(self, job: TierJob) -> None:
        """Refuse a job naming host blocks this tier does not have, before anything starts."""
        check_host_block_ids(job, self._host, type(self).__name__)

    def _claim(self, job_id: int) -> None:
        """Take ``job_id`` in flight. Lock held."""
        if job_id in self._active_jobs:
            raise ValueError(
                f"job id {job_id} is still in flight on {type(self).__name__} at {self._where}: give each job a new id"
            )
        self._active_jobs.add(job_id)

    def _report(self, job_id: int, success: bool, transfer_bytes: int, seconds: float) -> None:
        """Report a job finished, for the next :meth:`get_finished`. Lock held."""
        self._finished.append(TransferResult(job_id, success, transfer_bytes, seconds))
        self._active_jobs.discard(job_id)
