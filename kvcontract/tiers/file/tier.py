"""A secondary tier that keeps blocks as checksummed files under a directory and survives restarts."""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import math
import time
from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path

import torch
from typing_extensions import override

from kvcontract.contracts.identity import BlockIdentity
from kvcontract.contracts.keys import OffloadKey
from kvcontract.contracts.policy import CachePolicy
from kvcontract.contracts.request import LookupResult
from kvcontract.contracts.tier import TierJob
from kvcontract.contracts.values import BlockStatus
from kvcontract.policies import make_policy
from kvcontract.tiers.base import TierBase
from kvcontract.tiers.file.block_dir import DEFAULT_UMASK, BlockDirectory, ForeignBlock, FoundBlock
from kvcontract.tiers.file.block_file import delete_block, read_block, write_block
from kvcontract.tiers.integrity import (
    CorruptBlockError,
    ForgedValueError,
    IdentityMismatchError,
    MismatchLog,
    value_mac,
)
from kvcontract.tiers.io_pool import READ, WRITE, PriorityThreadPool, Task

__all__ = ["MEDIUM", "FileTier", "FileTierStats"]

MEDIUM = "FILE"
"""The ``medium`` of this tier's events."""


_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FileTierStats:
    """What the tier counts for operators: block files found corrupt, or written under another identity."""

    checksum_failures: int = 0
    """Block files that failed verification on load (checksum, header, length or key wrong, or no regular file)."""
    identity_mismatches: int = 0
    """Block files met in this identity's directory that another identity wrote (each a miss, the file deleted)."""
    forged_values: int = 0
    """Block files whose integrity MAC did not hold, or that carried none (or one) where the tier expects the other (each a miss, the file deleted)."""


@dataclass(eq=False)
class _JobProgress:
    """One submitted job: blocks still running, bytes moved, whether every block succeeded."""

    job_id: int
    remaining: int
    success: bool = True
    transfer_bytes: int = 0
    started: float = math.inf
    stored_keys: set[OffloadKey] = field(default_factory=set[OffloadKey])
    store_order: Sequence[OffloadKey] = ()


class FileTier(TierBase):
    """Blocks as files under ``root``, with its own capacity (in blocks) and eviction policy.

    ``host_blocks`` is the host memory that job host block ids index: a 2-D ``torch.uint8``
    CPU tensor ``(num_host_blocks, bytes_per_block)``; the caller keeps a job's host blocks
    reserved until the job is reported by :meth:`get_finished`. ``policy`` is a registered
    policy name or an empty :class:`CachePolicy` with room for ``capacity`` blocks.

    Jobs run on ``io_threads`` threads, loads before stores; ``submit_*`` and
    :meth:`lookup` never wait for I/O. A result's ``transfer_seconds`` runs from the job's
    first block I/O to its last. A store writes each block to a temporary file and renames
    it into place, so readers (in this process or another sharing ``root``) see whole files
    only; a failed write fails the job and leaves its key unindexed. Every load verifies the
    file's header and checksum: a missing, corrupt or truncated file fails its key, which
    leaves the index with an ``OffloadingEvent(removed=True)``; the job then reports
    ``success=False``, the host blocks of the keys that verified hold their data and those
    of the failed keys are zero-filled. A caller must not treat any host block of a failed
    load as valid.

    On start the index is rebuilt from the files' headers (newest most recently used;
    the oldest beyond ``capacity`` are deleted; files of another block size are ignored)
    and abandoned temporary files are removed, so the cache survives restarts. Processes
    sharing ``root`` each index what they found at start and what they stored, each within
    its own capacity; :meth:`lookup` never reads the disk, so a block another process wrote
    later is seen at the next start, and one it evicted reads as a miss.

    ``identity`` is the block identity of this engine: blocks live under
    ``root/<its fingerprint>/``, each file carries the fingerprint, and a file of another
    identity is a miss, never bytes in a host block. Engines of many models share a root
    side by side; each indexes, counts against its ``capacity`` and evicts only its own
    blocks. Shard directories of format 1 (no identity) are deleted at start.

    Files are created ``0o666 & ~umask`` and directories ``0o777 & ~umask`` (0600 and 0700
    by default; ``0o007`` shares them with a group). The root must belong to this user and
    be writable by no one the umask leaves out, unless ``trust_shared_root``; nothing inside
    it is followed through a symlink, and anything but a regular file where a block belongs
    is corrupt (see ``docs/file-tier.md`` for the threat model). Events are recorded only with
    ``enable_events``, so a tier whose events nobody takes holds none. ``integrity_key``
    (32 or more secret bytes the engines sharing ``root`` hold) seals every file with a keyed
    MAC; a file without it, or sealed with another key, is a miss and deleted.
    """

    def __init__(
        self,
        root: str | Path,
        capacity: int,
        host_blocks: torch.Tensor,
        *,
        identity: BlockIdentity,
        policy: str | CachePolicy = "lru",
        io_threads: int = 4,
        umask: int = DEFAULT_UMASK,
        trust_shared_root: bool = False,
        enable_events: bool = False,
        integrity_key: bytes | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"FileTier capacity must be at least 1 block, got {capacity}")
        super().__init__(
            host_blocks,
            identity=identity,
            mac=value_mac(integrity_key),
            medium=MEDIUM,
            where=str(root),
            enable_events=enable_events,
        )
        self._capacity = capacity
        self._policy = make_policy(policy, capacity)
        self._forged = 0
        self._dir = BlockDirectory(
            Path(root), identity.fingerprint_hex, umask=umask, trust_shared_root=trust_shared_root
        )
        self._mismatches = MismatchLog(_log, f"file tier at {root}", identity.fingerprint_hex)
        self._block_ids = itertools.count()
        self._deleting: dict[OffloadKey, int] = {}
        self._stores_behind_delete: dict[OffloadKey, list[Task]] = {}
        self._checksum_failures = 0
        if self._dir.remove_format_1_shards():
            _log.info(
                "file tier at %s: removed the shard directories of block format 1 (blocks without an identity)", root
            )
        self._rebuild_index()
        self._pool = PriorityThreadPool(io_threads, name="file-tier")

    @property
    def root(self) -> Path:
        """The directory holding the block files."""
        return self._dir.root

    def block_path(self, key: OffloadKey) -> Path:
        """Where ``key``'s block file belongs, for people and tests; the tier reaches it through its directory."""
        return Path(self._dir.path_of(key))

    @property
    def capacity(self) -> int:
        """Most blocks this tier holds."""
        return self._capacity

    def __len__(self) -> int:
        """Blocks indexed now, stores in flight included."""
        with self._lock:
            return len(self._policy)

    @override
    def __repr__(self) -> str:
        return f"FileTier(root={str(self.root)!r}, capacity={self._capacity}, used={len(self)})"

    @override
    def lookup(self, key: OffloadKey) -> LookupResult:
        """``HIT`` if indexed and stored, ``HIT_PENDING`` while its store runs, else ``MISS``."""
        with self._lock:
            block = self._policy.get(key)
        if block is None:
            return LookupResult.MISS
        return LookupResult.HIT if block.is_ready else LookupResult.HIT_PENDING

    @override
    def submit_store(self, job: TierJob) -> bool:
        """Start writing the job's keys not yet indexed, evicting to make room.

        ``False`` (nothing started) once shut down, or when the policy cannot free room for
        them without evicting a key of the job, a block being read or one being written.
        """
        self._check_job(job)
        with self._lock:
            if self._closed:
                return False
            self._claim(job.job_id)
            new: dict[OffloadKey, int] = {}
            for key, host_id in zip(job.keys, job.host_block_ids):
                if key not in new and self._policy.get(key) is None:
                    new[key] = host_id
            if not self._make_room(len(new), frozenset(job.keys)):
                self._active_jobs.discard(job.job_id)
                return False
            progress = _JobProgress(job.job_id, remaining=len(new), store_order=list(new))
            # A job's keys come in chain order; inserted last to first, the chain's head is the
            # most recent, so eviction takes a chain from its tail and what stays is a prefix
            # a lookup can still reach (as vLLM's reversed touch does for its CPU blocks).
            blocks = {key: BlockStatus(next(self._block_ids)) for key in reversed(new)}
            for key, block in blocks.items():
                self._policy.insert(key, block)
            for key, host_id in new.items():
                block = blocks[key]
                task = functools.partial(self._store_block, progress, key, block, host_id)
                if key in self._deleting:
                    self._stores_behind_delete.setdefault(key, []).append(task)
                else:
                    self._pool.submit(WRITE, task)
            if not new:
                self._finish(progress)
        return True

    @override
    def submit_load(self, job: TierJob) -> bool:
        """Start reading the job's keys into its host blocks.

        ``False`` (nothing started) once shut down or when a key is not readable now
        (:meth:`lookup` would not say ``HIT``).
        """
        self._check_job(job)
        with self._lock:
            if self._closed:
                return False
            blocks = [self._policy.get(key) for key in job.keys]
            ready = [block for block in blocks if block is not None and block.is_ready]
            if len(ready) != len(blocks):
                return False
            self._claim(job.job_id)
            progress = _JobProgress(job.job_id, remaining=len(ready))
            for key, block, host_id in zip(job.keys, ready, job.host_block_ids):
                block.ref_cnt += 1
                if block.ref_cnt == 1:
                    self._policy.mark_non_evictable(key)
                self._pool.submit(READ, functools.partial(self._load_block, progress, key, block, host_id))
            if not ready:
                self._finish(progress)
        return True

    def stats(self) -> FileTierStats:
        """Counters since the tier started."""
        with self._lock:
            return FileTierStats(self._checksum_failures, self._mismatches.count, self._forged)

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        """Mark the indexed ``keys`` recently used, the first most recently."""
        with self._lock:
            present = [key for key in keys if self._policy.get(key) is not None]
            if present:
                self._policy.touch(present)

    @override
    def _release(self) -> None:
        self._dir.close()

    def _rebuild_index(self) -> None:
        # Oldest first; files written within one clock tick share an mtime, and the key
        # then orders them, so the same files give the same order whatever the directory order.
        found: list[FoundBlock] = []
        for block in self._dir.scan(self._fingerprint):
            if isinstance(block, ForeignBlock):
                self._mismatches.record(block.name)
            elif block.payload_len == self._block_bytes:
                found.append(block)
        found.sort(key=lambda block: (block.mtime, block.key))
        excess = max(0, len(found) - self._capacity)
        for block in found[:excess]:
            self._delete_file(block.key)
        kept = found[excess:]
        for block in kept:
            self._policy.insert(block.key, BlockStatus(next(self._block_ids), ref_cnt=0))
            self._policy.mark_evictable(block.key)
        if kept:
            self._events.record([b.key for b in kept], removed=False)

    def _make_room(self, count: int, protected: Set[OffloadKey]) -> bool:
        """Evict so that ``count`` more blocks fit; queue the victims' deletion. Lock held."""
        if count > self._capacity:
            return False
        excess = len(self._policy) + count - self._capacity
        if excess <= 0:
            return True
        victims = self._policy.evict(excess, protected)
        if victims is None:
            return False
        keys = [key for key, _ in victims]
        self._events.record(keys, removed=True)
        for key in keys:
            self._deleting[key] = self._deleting.get(key, 0) + 1
            self._pool.submit(WRITE, functools.partial(self._delete_evicted, key))
        return True

    def _delete_file(self, key: OffloadKey) -> None:
        """Delete the file of ``key``; a shard directory missing or not a directory holds nothing to delete."""
        with contextlib.suppress(OSError), self._dir.locate(key) as location:
            delete_block(location)

    def _delete_evicted(self, key: OffloadKey) -> None:
        """Delete an evicted block's file, then release the stores of that key queued behind it."""
        self._delete_file(key)
        with self._lock:
            left = self._deleting[key] - 1
            if left:
                self._deleting[key] = left
                return
            del self._deleting[key]
            for task in self._stores_behind_delete.pop(key, []):
                self._pool.submit(WRITE, task)

    def _store_block(self, progress: _JobProgress, key: OffloadKey, block: BlockStatus, host_id: int) -> None:
        started = time.perf_counter()
        try:
            with self._dir.locate(key, create=True) as location:
                write_block(
                    location, key, memoryview(self._rows[host_id]), fingerprint=self._fingerprint, mac=self._mac
                )
            ok = True
        except Exception as exc:
            ok = False
            _log.warning("file tier: store of key %s failed: %s", key.hex(), exc)
        with self._lock:
            indexed = self._policy.get(key) is block
            if ok and indexed:
                block.ref_cnt = 0
                self._policy.mark_evictable(key)
                progress.stored_keys.add(key)
            elif indexed:
                self._policy.remove(key)
            self._block_done(progress, ok, started)

    def _load_block(self, progress: _JobProgress, key: OffloadKey, block: BlockStatus, host_id: int) -> None:
        started = time.perf_counter()
        try:
            with self._dir.locate(key) as location:
                read_block(location, key, memoryview(self._rows[host_id]), fingerprint=self._fingerprint, mac=self._mac)
            ok, corrupt = True, False
        except ForgedValueError as exc:
            ok, corrupt = False, False
            with self._lock:
                self._forged += 1
                first = self._forged == 1
            if first:
                _log.warning(
                    "file tier: block file of key %s does not carry this tier's integrity MAC (%s): read as a miss; "
                    "further ones are counted in kvcontract_forged_values_total",
                    key.hex(),
                    exc,
                )
            self._host[host_id].zero_()
        except IdentityMismatchError:
            ok, corrupt = False, False
            self._mismatches.record(f"the block file of key {key.hex()}")
            self._host[host_id].zero_()
        except Exception as exc:
            ok = False
            corrupt = isinstance(exc, CorruptBlockError)
            _log.warning("file tier: load of key %s failed: %s", key.hex(), exc)
            self._host[host_id].zero_()
        with self._lock:
            self._checksum_failures += corrupt
            block.ref_cnt -= 1
            indexed = self._policy.get(key) is block
            if not ok and indexed:
                self._policy.remove(key)
                self._events.record([key], removed=True)
            elif indexed and block.ref_cnt == 0:
                self._policy.mark_evictable(key)
            self._block_done(progress, ok, started)

    def _block_done(self, progress: _JobProgress, ok: bool, started: float) -> None:
        """Account one finished block; report the job after its last. Lock held."""
        progress.started = min(progress.started, started)
        progress.remaining -= 1
        if ok:
            progress.transfer_bytes += self._block_bytes
        else:
            progress.success = False
        if progress.remaining == 0:
            self._finish(progress)

    def _finish(self, progress: _JobProgress) -> None:
        """Report a job as finished. Lock held."""
        if progress.stored_keys:
            stored = [key for key in progress.store_order if key in progress.stored_keys]
            self._events.record(stored, removed=False)
        seconds = time.perf_counter() - progress.started if progress.transfer_bytes else 0.0
        self._report(progress.job_id, progress.success, progress.transfer_bytes, seconds)
