"""A secondary tier on Mooncake Store, the distributed KV-cache pool that many engines share.

Mooncake owns capacity and eviction: each engine's client mounts ``global_segment_size``
bytes of its memory into the pool, and the master places and evicts values. The tier keeps
no index of its own, only what this process knows, so a key Mooncake evicted, or whose
segment left with its client, is a miss when it is loaded.

Zero copy: the host blocks are registered with the client once, and a job's values go
from and to them directly, one batched call per job (``batch_put_from_multi_buffers``,
``batch_get_into_multi_buffers``). A value is two buffers: the header of
:mod:`kvcontract.tiers.store_value` (identity fingerprint, key, payload checksum), built in
a registered header slot of the job's thread, then the host block itself. A load lands in
the job's host blocks, which the caller keeps reserved until the job is reported; every
value is checked before that, and a job with any bad, short, foreign or missing value is
reported failed with all its host blocks zero-filled, so no unchecked byte is ever read as
a block. A bad value is also removed from the store and reported as an
``OffloadingEvent(removed=True)``.

A lookup of a key this process has not seen queues the key for the lookup thread, which
asks for every key queued since its last batch with one ``batch_is_exist``; the lookup
answers ``RETRY`` until the answer lands and ``MISS`` after ``lookup_timeout``. A master
that does not answer (``RPC_FAIL``, ``RPC_TIMEOUT`` after ``timeout``) fails the job it
hit and opens a breaker: until the client's health check passes again, lookups say
``MISS`` and submits return ``False`` at once. Mooncake's client re-mounts its segment
when a restarted master comes back, so the tier recovers without a restart of the engine.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from typing_extensions import override

from kvcontract.contracts.identity import BlockIdentity
from kvcontract.contracts.keys import OffloadKey
from kvcontract.contracts.request import LookupResult
from kvcontract.contracts.tier import SecondaryTier, TierJob
from kvcontract.contracts.values import OffloadingEvent, TransferResult
from kvcontract.tiers.host_blocks import check_host_block_ids, check_host_blocks, check_identity_block_bytes
from kvcontract.tiers.integrity import MismatchLog
from kvcontract.tiers.io_pool import PriorityThreadPool
from kvcontract.tiers.mooncake_client import (
    MASTER_FAULTS,
    NO_SPACE,
    OBJECT_ALREADY_EXISTS,
    OBJECT_NOT_FOUND,
    OK,
    RPC_TIMEOUT,
    SEGMENT_NOT_FOUND,
    TOO_LONG,
    TRANSFER_FAIL,
    MooncakeConnection,
    MooncakeUnavailableError,
    connect,
    describe_code,
)
from kvcontract.tiers.store_value import BadValueError, check_value, encode_header_into, header_size

__all__ = ["MEDIUM", "MooncakeTier", "MooncakeTierStats"]

MEDIUM = "MOONCAKE"
"""The ``medium`` of this tier's events."""

PREFIX_FINGERPRINT_DIGITS = 16
"""Hex digits of the identity's fingerprint in every key name: 64 bits keep identities apart; the value holds all 128."""

_READ = 0
_WRITE = 1
_BACKGROUND = 2
"""Pool priorities: loads, then stores, then removals of bad values and health probes."""
_HEADER_SLOT_BYTES = 1 << 17
"""One I/O thread's registered header buffer: holds the headers of one batch, and always one key's (at most 65,575 bytes)."""
_LOOKUP_BATCH = 4096
_KNOWN_KEYS = 1 << 20
"""Keys known present that this process remembers (LRU); forgotten ones are asked again."""
_GONE = frozenset({OBJECT_NOT_FOUND, SEGMENT_NOT_FOUND})
"""Get results that mean the value is no longer in the store: evicted or removed."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MooncakeTierStats:
    """What the tier knows: payload bytes moved, lookup answers, value checks, faults."""

    bytes_written: int = 0
    bytes_read: int = 0
    hits: int = 0
    misses: int = 0
    lookups_sent: int = 0
    lookup_batches: int = 0
    lookup_timeouts: int = 0
    evicted: int = 0
    checksum_failures: int = 0
    rejected_values: int = 0
    identity_mismatches: int = 0
    refused_stores: int = 0
    timeouts: int = 0
    connection_errors: int = 0
    reconnects: int = 0
    failed_jobs: int = 0


@dataclass
class _Counters:
    bytes_written: int = 0
    bytes_read: int = 0
    hits: int = 0
    misses: int = 0
    lookups_sent: int = 0
    lookup_batches: int = 0
    lookup_timeouts: int = 0
    evicted: int = 0
    checksum_failures: int = 0
    rejected_values: int = 0
    identity_mismatches: int = 0
    refused_stores: int = 0
    timeouts: int = 0
    connection_errors: int = 0
    reconnects: int = 0
    failed_jobs: int = 0


class MooncakeTier(SecondaryTier):
    """Blocks as Mooncake Store objects named ``kvc:<identity>[:namespace]:<key hex>``, shared by every engine of that store.

    ``host_blocks`` is the host memory that job host block ids index: a 2-D ``torch.uint8``
    CPU tensor ``(num_host_blocks, bytes_per_block)``, registered with the client for the
    tier's life; the caller keeps a job's host blocks reserved until :meth:`get_finished`
    reports the job. ``identity`` is this engine's block identity: the first 16 hex digits of
    its fingerprint name every key and all of it is in every value, so a value of another
    identity is a miss. ``namespace`` (optional) scopes keys further, within the identity.
    ``master`` (``host:port``), ``metadata_server`` (an HTTP URL, or ``P2PHANDSHAKE``),
    ``protocol`` (``tcp`` or ``rdma``) with its ``devices``, ``local_hostname`` (the address
    other clients reach this one at), ``global_segment_size`` (bytes this process lends the
    store), ``local_buffer_size`` and ``replicas`` go to Mooncake's client; ``timeout``
    (seconds) bounds a call to the master. ``start_degraded`` starts the tier even when the
    store does not answer, retrying every ``retry_interval`` seconds.
    """

    def __init__(
        self,
        host_blocks: torch.Tensor,
        *,
        identity: BlockIdentity,
        master: str = "127.0.0.1:50051",
        metadata_server: str = "http://127.0.0.1:8080/metadata",
        protocol: str = "tcp",
        devices: str = "",
        local_hostname: str = "127.0.0.1",
        global_segment_size: int = 1 << 30,
        local_buffer_size: int = 256 << 20,
        replicas: int = 1,
        timeout: float = 5.0,
        io_threads: int = 4,
        namespace: str | None = None,
        lookup_timeout: float = 0.1,
        lookup_wait: float = 0.0,
        retry_interval: float = 1.0,
        start_degraded: bool = False,
    ) -> None:
        check_host_blocks(host_blocks, "MooncakeTier")
        check_identity_block_bytes(identity, host_blocks, "MooncakeTier")
        self._host = host_blocks
        self._rows = host_blocks.numpy()
        self._block_bytes = int(host_blocks.shape[1])
        self._row_stride = int(host_blocks.stride(0))
        self._identity = identity
        self._fingerprint = identity.fingerprint
        self._namespace = namespace
        self._prefix = f"kvc:{identity.fingerprint_hex[:PREFIX_FINGERPRINT_DIGITS]}" + (f":{namespace}" if namespace else "")
        self._lookup_timeout = lookup_timeout
        self._lookup_wait = lookup_wait
        self._retry_interval = retry_interval
        self._master = master
        self._headers = torch.zeros((io_threads, _HEADER_SLOT_BYTES), dtype=torch.uint8)
        self._header_rows = self._headers.numpy()
        self._free_slots: queue.SimpleQueue[int] = queue.SimpleQueue()
        for slot in range(io_threads):
            self._free_slots.put(slot)
        self._connect = functools.partial(
            connect,
            master=master,
            metadata_server=metadata_server,
            protocol=protocol,
            devices=devices,
            local_hostname=local_hostname,
            global_segment_size=global_segment_size,
            local_buffer_size=local_buffer_size,
            replicas=replicas,
            timeout=timeout,
        )
        self._connection: MooncakeConnection | None = None
        try:
            self._connection = self._connect_and_register()
        except MooncakeUnavailableError:
            if not start_degraded:
                raise
            _log.warning("mooncake tier: master %s does not answer; starting degraded", master)
        self._lock = threading.Lock()
        self._answered = threading.Condition(self._lock)
        self._counters = _Counters()
        self._mismatches = MismatchLog(_log, f"mooncake tier at {master}", identity.fingerprint_hex)
        self._known: OrderedDict[OffloadKey, None] = OrderedDict()
        self._storing: dict[OffloadKey, int] = {}
        self._asking: dict[OffloadKey, float] = {}
        self._absent: dict[OffloadKey, float] = {}
        self._queued: list[OffloadKey] = []
        self._events: list[OffloadingEvent] = []
        self._finished: list[TransferResult] = []
        self._active_jobs: set[int] = set()
        self._healthy = self._connection is not None
        self._probing = False
        self._last_probe = -float("inf")
        self._closed = False
        self._pool = PriorityThreadPool(io_threads, name="mooncake-tier")
        self._lookup_thread = threading.Thread(target=self._lookup_loop, name="mooncake-tier-lookup", daemon=True)
        self._lookup_thread.start()

    @override
    def __repr__(self) -> str:
        return f"MooncakeTier({self._master!r}, prefix={self._prefix!r})"

    @property
    def identity(self) -> BlockIdentity:
        """The block identity whose values this tier reads and writes."""
        return self._identity

    @property
    def namespace(self) -> str | None:
        """The namespace that scopes this tier's keys within its identity, if one was given."""
        return self._namespace

    @property
    def healthy(self) -> bool:
        """Whether the last contact with the master succeeded (else lookups miss and submits refuse)."""
        return self._healthy

    def store_key(self, key: OffloadKey) -> str:
        """The Mooncake object name of ``key``: identity and namespace, then the key in hex."""
        return f"{self._prefix}:{key.hex()}"

    def stats(self) -> MooncakeTierStats:
        """Counters since the tier started."""
        with self._lock:
            return MooncakeTierStats(**vars(self._counters))

    @override
    def lookup(self, key: OffloadKey) -> LookupResult:
        """``HIT`` if known present, ``HIT_PENDING`` while this process stores it, else ask the store.

        A key not known is queued for the next ``batch_is_exist`` and answered ``RETRY``; the
        answer is given at the next lookup, ``MISS`` once ``lookup_timeout`` has passed.
        """
        now = time.monotonic()
        with self._lock:
            answer = self._lookup_locked(key, now)
            if answer is LookupResult.RETRY and self._lookup_wait > 0:
                self._answered.wait_for(lambda: key not in self._asking, self._lookup_wait)
                answer = self._lookup_locked(key, time.monotonic())
            if answer is LookupResult.HIT:
                self._counters.hits += 1
            elif answer is LookupResult.MISS:
                self._counters.misses += 1
        return answer

    def _lookup_locked(self, key: OffloadKey, now: float) -> LookupResult:
        if key in self._known:
            self._known.move_to_end(key)
            return LookupResult.HIT
        if key in self._storing:
            return LookupResult.HIT_PENDING
        if self._absent.pop(key, None) is not None:
            return LookupResult.MISS
        asked = self._asking.get(key)
        if asked is not None:
            if now - asked <= self._lookup_timeout:
                return LookupResult.RETRY
            del self._asking[key]
            self._counters.lookup_timeouts += 1
            return LookupResult.MISS
        if not self._healthy or self._closed:
            self._probe_locked(now)
            return LookupResult.MISS
        self._asking[key] = now
        self._queued.append(key)
        if len(self._queued) == 1:
            self._answered.notify_all()
        return LookupResult.RETRY

    @override
    def submit_store(self, job: TierJob) -> bool:
        """Start writing the job's keys that are neither known present nor being stored.

        ``False`` (nothing started) once shut down or while the master does not answer.
        """
        check_host_block_ids(job, self._host, "MooncakeTier")
        with self._lock:
            if not self._accepting(time.monotonic()):
                return False
            self._claim(job.job_id)
            new: dict[OffloadKey, int] = {}
            for key, host_id in zip(job.keys, job.host_block_ids):
                if key in new or key in self._storing or key in self._known:
                    continue
                new[key] = host_id
                self._storing[key] = job.job_id
                self._absent.pop(key, None)
            if new:
                self._pool.submit(_WRITE, functools.partial(self._store_job, job.job_id, new))
            else:
                self._finish(job.job_id, True, 0, 0.0)
        return True

    @override
    def submit_load(self, job: TierJob) -> bool:
        """Start reading the job's keys into its host blocks.

        ``False`` (nothing started) once shut down, while the master does not answer, or
        when a key is not known present (:meth:`lookup` would not say ``HIT``).
        """
        check_host_block_ids(job, self._host, "MooncakeTier")
        with self._lock:
            if not self._accepting(time.monotonic()):
                return False
            if any(key not in self._known for key in job.keys):
                return False
            self._claim(job.job_id)
            self._pool.submit(_READ, functools.partial(self._load_job, job.job_id, job.keys, job.host_block_ids))
        return True

    @override
    def get_finished(self) -> list[TransferResult]:
        """Jobs finished since the last call, each once."""
        with self._lock:
            finished, self._finished = self._finished, []
        return finished

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        """Nothing to send: Mooncake ranks values for eviction by their own reads and leases."""

    @override
    def take_events(self) -> list[OffloadingEvent]:
        """Blocks stored, and blocks found gone or bad, since the last call."""
        with self._lock:
            events, self._events = self._events, []
        return events

    @override
    def shutdown(self) -> None:
        """Refuse new jobs, finish those in flight, stop the threads, unregister the buffers and close the client (in the background)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._answered.notify_all()
        self._pool.shutdown()
        self._lookup_thread.join()
        connection = self._connection
        if connection is not None:
            connection.store.unregister_buffer(self._headers.data_ptr())
            connection.store.unregister_buffer(self._host.data_ptr())
            # The client's close waits about a second for its heartbeat thread (measured: 1.01 s);
            # nothing of the tier is in use any more, so it runs on a thread of its own.
            threading.Thread(target=connection.store.close, name="mooncake-tier-close", daemon=True).start()

    def _connect_and_register(self) -> MooncakeConnection:
        """A set-up client with the host blocks and the header slots registered for zero-copy transfers."""
        connection = self._connect()
        rows = int(self._host.shape[0])
        span = (rows - 1) * self._row_stride + self._block_bytes if rows else 0
        for pointer, size in ((self._host.data_ptr(), span), (self._headers.data_ptr(), self._headers.numel())):
            code = connection.store.register_buffer(pointer, size)
            if code != OK:
                connection.store.close()
                raise MooncakeUnavailableError(
                    f"Mooncake tier: registering {size} bytes of host memory failed ({describe_code(code)})"
                )
        return connection

    def _accepting(self, now: float) -> bool:
        """Whether jobs may start; probes the master when it is down. Lock held."""
        if self._closed:
            return False
        if not self._healthy:
            self._probe_locked(now)
            return False
        return True

    def _claim(self, job_id: int) -> None:
        if job_id in self._active_jobs:
            raise ValueError(f"job id {job_id} is still in flight on {self!r}: give each job a new id")
        self._active_jobs.add(job_id)

    def _row(self, host_id: int) -> int:
        return self._host.data_ptr() + host_id * self._row_stride

    def _batches(self, keys: Sequence[OffloadKey]) -> list[range]:
        """Index ranges of ``keys`` whose headers fit one header slot together."""
        batches: list[range] = []
        start = used = 0
        for i, key in enumerate(keys):
            size = header_size(key)
            if used + size > _HEADER_SLOT_BYTES:
                batches.append(range(start, i))
                start, used = i, 0
            used += size
        if start < len(keys):
            batches.append(range(start, len(keys)))
        return batches

    def _store_job(self, job_id: int, blocks: dict[OffloadKey, int]) -> None:
        """Put ``blocks`` (key to host block) straight from the host blocks, headers from this thread's slot."""
        started = time.perf_counter()
        keys = list(blocks)
        codes: list[int] = []
        error: BaseException | None = None
        slot = self._free_slots.get()
        try:
            connection = self._live_connection()
            headers = memoryview(self._header_rows[slot])
            base = self._headers.data_ptr() + slot * _HEADER_SLOT_BYTES
            for batch in self._batches(keys):
                names: list[str] = []
                pointers: list[list[int]] = []
                sizes: list[list[int]] = []
                offset = 0
                for i in batch:
                    row = blocks[keys[i]]
                    size = encode_header_into(
                        headers[offset:], keys[i], self._fingerprint, memoryview(self._rows[row])
                    )
                    names.append(self.store_key(keys[i]))
                    pointers.append([base + offset, self._row(row)])
                    sizes.append([size, self._block_bytes])
                    offset += size
                codes += connection.store.batch_put_from_multi_buffers(names, pointers, sizes, connection.put_config)
        except Exception as exc:
            error = exc
        finally:
            self._free_slots.put(slot)
        seconds = time.perf_counter() - started
        failed = [code for code in codes if code not in (OK, OBJECT_ALREADY_EXISTS)]
        with self._lock:
            for key in keys:
                if self._storing.get(key) == job_id:
                    del self._storing[key]
            if error is not None:
                self._fault_locked(f"store job {job_id}", error=error)
            elif failed:
                self._store_refused_locked(job_id, failed)
            if error is not None or failed or len(codes) != len(keys):
                self._finish(job_id, False, 0, seconds)
                return
            for key in keys:
                self._remember(key)
            self._counters.bytes_written += len(keys) * self._block_bytes
            self._events.append(OffloadingEvent(keys, MEDIUM, removed=False))
            self._finish(job_id, True, len(keys) * self._block_bytes, seconds)

    def _store_refused_locked(self, job_id: int, failed: Sequence[int]) -> None:
        """Log and count a store the client refused. Lock held."""
        faults = [code for code in failed if code in MASTER_FAULTS]
        if faults:
            self._fault_locked(f"store job {job_id}", code=faults[0])
            return
        if all(code == NO_SPACE for code in failed):
            self._counters.refused_stores += 1
        _log.warning("mooncake tier: store job %d refused: %s", job_id, describe_code(failed[0]))

    def _load_job(self, job_id: int, keys: Sequence[OffloadKey], host_ids: Sequence[int]) -> None:
        """Get ``keys`` into ``host_ids`` (headers into this thread's slot) and check every value before reporting.

        A key whose value is gone (evicted, removed, its segment left), bad, or unreadable for
        another reason is forgotten with a removed event; any of them fails the job, whose
        host blocks are then all zero-filled. Only bad values are removed from the store.
        """
        started = time.perf_counter()
        gone: list[OffloadKey] = []
        bad: list[OffloadKey] = []
        unreachable: list[OffloadKey] = []
        suspect = 0
        fault = 0
        checksum_failures = 0
        mismatches = 0
        error: BaseException | None = None
        slot = self._free_slots.get()
        try:
            connection = self._live_connection()
            headers = memoryview(self._header_rows[slot])
            base = self._headers.data_ptr() + slot * _HEADER_SLOT_BYTES
            for batch in self._batches(keys):
                offsets: list[int] = []
                pointers: list[list[int]] = []
                sizes: list[list[int]] = []
                offset = 0
                for i in batch:
                    offsets.append(offset)
                    size = header_size(keys[i])
                    pointers.append([base + offset, self._row(host_ids[i])])
                    sizes.append([size, self._block_bytes])
                    offset += size
                names = [self.store_key(keys[i]) for i in batch]
                results = connection.store.batch_get_into_multi_buffers(names, pointers, sizes)
                for i, at, result in zip(batch, offsets, results):
                    if result in _GONE:
                        gone.append(keys[i])
                        continue
                    if result in MASTER_FAULTS:
                        fault = fault or result
                        continue
                    if result < 0 and result != TOO_LONG:
                        unreachable.append(keys[i])
                        suspect += result == TRANSFER_FAIL
                        continue
                    size = header_size(keys[i])
                    try:
                        if result != size + self._block_bytes:
                            shown = "more" if result < 0 else f"{result} bytes"
                            raise BadValueError(f"holds {shown}, expected {size + self._block_bytes} bytes")
                        check_value(
                            headers[at : at + size],
                            memoryview(self._rows[host_ids[i]]),
                            keys[i],
                            self._fingerprint,
                            self._block_bytes,
                        )
                    except BadValueError as exc:
                        if exc.identity_mismatch:
                            self._mismatches.record(f"the value of key {keys[i].hex()}")
                        else:
                            _log.warning("mooncake tier: value of key %s is bad: %s", keys[i].hex(), exc)
                        bad.append(keys[i])
                        checksum_failures += exc.checksum_failed
                        mismatches += exc.identity_mismatch
        except Exception as exc:
            error = exc
        finally:
            self._free_slots.put(slot)
        success = error is None and not fault and not gone and not bad and not unreachable
        if not success:
            for host_id in host_ids:
                self._host[host_id].zero_()
        seconds = time.perf_counter() - started
        with self._lock:
            lost = [*gone, *bad, *unreachable]
            for key in lost:
                self._known.pop(key, None)
            if lost:
                self._events.append(OffloadingEvent(lost, MEDIUM, removed=True))
            if bad and not self._closed:
                self._pool.submit(_BACKGROUND, functools.partial(self._remove, bad))
            if suspect and not self._closed:
                self._pool.submit(_BACKGROUND, functools.partial(self._remove_short, unreachable))
            self._counters.evicted += len(gone)
            self._counters.checksum_failures += checksum_failures
            self._counters.rejected_values += len(bad) - checksum_failures - mismatches
            self._counters.identity_mismatches += mismatches
            if error is not None or fault:
                self._fault_locked(f"load job {job_id}", error=error, code=fault)
            transferred = len(keys) * self._block_bytes if success else 0
            self._counters.bytes_read += transferred
            self._finish(job_id, success, transferred, seconds)

    def _remove(self, keys: Sequence[OffloadKey]) -> None:
        """Remove values that failed their check, so no engine finds them again; a failure is logged only."""
        try:
            self._live_connection().store.batch_remove([self.store_key(key) for key in keys], True)
        except Exception as exc:
            _log.warning("mooncake tier: removing bad values failed: %s", exc)

    def _remove_short(self, keys: Sequence[OffloadKey]) -> None:
        """Remove the values among ``keys`` whose size is not a block's.

        A value shorter than the buffers of a get fails its transfer (``TRANSFER_FAIL``),
        as a value whose segment left does: the size tells the two apart.
        """
        try:
            store = self._live_connection().store
            sizes = {key: store.get_size(self.store_key(key)) for key in keys}
            short = [key for key, size in sizes.items() if 0 <= size != header_size(key) + self._block_bytes]
        except Exception as exc:
            _log.warning("mooncake tier: sizing unreadable values failed: %s", exc)
            return
        if short:
            _log.warning("mooncake tier: values of keys %s are not a block long", [key.hex() for key in short[:4]])
            with self._lock:
                self._counters.rejected_values += len(short)
            self._remove(short)

    def _live_connection(self) -> MooncakeConnection:
        connection = self._connection
        if connection is None:
            raise MooncakeUnavailableError(f"Mooncake tier: not connected to master {self._master}")
        return connection

    def _lookup_loop(self) -> None:
        """Ask for the keys queued since the last batch with one ``batch_is_exist``, until shutdown."""
        while True:
            with self._lock:
                self._answered.wait_for(lambda: bool(self._queued) or self._closed)
                if self._closed:
                    return
                batch = self._queued[:_LOOKUP_BATCH]
                del self._queued[:_LOOKUP_BATCH]
                self._counters.lookup_batches += 1
                self._counters.lookups_sent += len(batch)
            self._ask(batch)

    def _ask(self, batch: Sequence[OffloadKey]) -> None:
        replies: list[int] = []
        error: BaseException | None = None
        try:
            replies = self._live_connection().store.batch_is_exist([self.store_key(key) for key in batch])
        except Exception as exc:
            error = exc
        now = time.monotonic()
        with self._lock:
            fault = next((reply for reply in replies if reply < 0), 0)
            if error is not None or fault:
                self._fault_locked("lookup", error=error, code=fault)
            for i, key in enumerate(batch):
                if self._asking.pop(key, None) is None:
                    continue
                if i < len(replies) and replies[i] == 1:
                    if key not in self._storing:
                        self._remember(key)
                else:
                    self._absent[key] = now
            if len(self._absent) > _LOOKUP_BATCH:
                horizon = now - self._lookup_timeout
                self._absent = {k: t for k, t in self._absent.items() if t >= horizon}
            self._answered.notify_all()

    def _remember(self, key: OffloadKey) -> None:
        """Know ``key`` present; the least recently used beyond the bound are forgotten. Lock held."""
        self._known[key] = None
        self._known.move_to_end(key)
        if len(self._known) > _KNOWN_KEYS:
            self._known.popitem(last=False)

    def _fault_locked(self, what: str, *, error: BaseException | None = None, code: int = 0) -> None:
        """Count a call that failed; one the master did not answer opens the breaker. Lock held."""
        if error is not None:
            _log.warning("mooncake tier: %s failed: %s: %s", what, type(error).__name__, error)
            if isinstance(error, ConnectionError):
                self._counters.connection_errors += 1
                self._healthy = False
            return
        _log.warning("mooncake tier: %s failed: %s", what, describe_code(code))
        if code == RPC_TIMEOUT:
            self._counters.timeouts += 1
        else:
            self._counters.connection_errors += 1
        self._healthy = False

    def _probe_locked(self, now: float) -> None:
        """Queue a health check (or a connect) at most every ``retry_interval`` seconds while unhealthy. Lock held."""
        if self._probing or self._closed or now - self._last_probe < self._retry_interval:
            return
        self._probing = True
        self._last_probe = now
        self._pool.submit(_BACKGROUND, self._probe)

    def _probe(self) -> None:
        ok = False
        try:
            if self._connection is None:
                self._connection = self._connect_and_register()
            ok = self._connection.store.health_check() == OK
        except Exception as exc:
            _log.info("mooncake tier: master %s still does not answer: %s", self._master, exc)
        with self._lock:
            self._probing = False
            if ok and not self._healthy:
                self._healthy = True
                self._counters.reconnects += 1

    def _finish(self, job_id: int, success: bool, transfer_bytes: int, seconds: float) -> None:
        """Report a job as finished. Lock held."""
        if not success:
            self._counters.failed_jobs += 1
        self._finished.append(TransferResult(job_id, success, transfer_bytes, seconds))
        self._active_jobs.discard(job_id)
