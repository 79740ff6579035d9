"""A secondary tier on Mooncake Store, the distributed KV-cache pool that many engines share.

Mooncake owns capacity and eviction: each engine's client mounts ``global_segment_size``
bytes of its memory into the pool, and the master places and evicts values. The tier keeps
no index of its own, only what this process knows, so a key Mooncake evicted, or whose
segment left with its client, is a miss when it is loaded.

Jobs run in two lanes (:mod:`kvcontract.tiers.job_lane`), one for stores and one for loads:
one call of the client per lane at a time, each taking the jobs queued behind the last, up
to 64 values a call. Each lane has a registered slot. Blocks of 256 KiB and more go zero
copy: the host blocks are registered with the client once, and a value is two buffers, the
header of :mod:`kvcontract.tiers.store_value` (identity fingerprint, key, payload checksum)
built in the slot, then the host block itself (``batch_put_from_multi_buffers``,
``batch_get_into_multi_buffers``). Smaller blocks are copied beside their header in the slot,
a value one buffer (``batch_put_from``, ``batch_get_into``). A load lands in the job's host
blocks, which the caller keeps reserved until the job is reported; every value is checked
before that, and a job with any bad, short, foreign or missing value is reported failed
with all its host blocks zero-filled, so no unchecked byte is ever read as a block. A bad
value is also removed from the store and reported as an ``OffloadingEvent(removed=True)``.

What this process knows of the store, the batched lookups (one ``batch_is_exist``), the
breaker and the job bookkeeping are :mod:`kvcontract.tiers.remote_tier`'s. A master that
does not answer (``RPC_FAIL``, ``RPC_TIMEOUT`` after ``timeout``) fails the job it hit and
opens the breaker until the client's health check passes again. Mooncake's client
re-mounts its segment when a restarted master comes back, so the tier recovers without a
restart of the engine.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from typing_extensions import override

from kvcontract.contracts.identity import BlockIdentity
from kvcontract.contracts.keys import OffloadKey
from kvcontract.tiers.host_blocks import check_host_blocks
from kvcontract.tiers.integrity import value_mac
from kvcontract.tiers.io_pool import BACKGROUND, READ, WRITE
from kvcontract.tiers.job_lane import JobLane
from kvcontract.tiers.mooncake.client import (
    DEFAULT_CLIENT,
    MASTER_FAULTS,
    NO_SPACE,
    OBJECT_ALREADY_EXISTS,
    OBJECT_NOT_FOUND,
    OK,
    RPC_TIMEOUT,
    SEGMENT_NOT_FOUND,
    TOO_LONG,
    TRANSFER_FAIL,
    MasterFaultError,
    MooncakeClientOptions,
    MooncakeConnection,
    MooncakeUnavailableError,
    connect,
    describe_code,
)
from kvcontract.tiers.remote_tier import (
    DEFAULT_OPTIONS,
    Fault,
    LoadOutcome,
    RemoteTier,
    RemoteTierOptions,
    RemoteTierStats,
)
from kvcontract.tiers.store_value import (
    BadValueError,
    check_value,
    encode_header_into,
    header_size,
    max_header_size,
    sealing_differs,
)

__all__ = ["MEDIUM", "MooncakeTier", "MooncakeTierStats"]

MEDIUM = "MOONCAKE"
"""The ``medium`` of this tier's events."""

ZERO_COPY_FROM = 256 << 10
"""Blocks of this size or more go straight from and to the host blocks, a value as two buffers (its header, the block).

The client moves each buffer of a value as a transfer of its own, which costs about as much as
copying a few hundred KiB: smaller blocks are copied through the lane's slot beside their
header, one buffer per value (64 KiB blocks through the tier's lanes, jobs of 16 / 64 against
the raw client: copied 0.86 / 0.67 stores and 0.74 / 0.59 loads, two buffers 0.64 / 0.63 and
0.59 / 0.54; at 512 KiB and 2 MiB two buffers keep up with the raw client).
"""
_HEADER_SLOT_BYTES = 1 << 17
"""A lane's registered slot when the blocks go zero copy: the headers of one call, and always one key's."""
_BATCH_VALUES = 64
"""Values of one call of the client: a lane merges queued jobs up to it, and a slot of copied blocks holds that many of 20-byte keys."""
_STORE_SLOT = 0
_LOAD_SLOT = 1
"""The registered slots, one per lane: the store lane's and the load lane's."""
_GONE = frozenset({OBJECT_NOT_FOUND, SEGMENT_NOT_FOUND})
"""Get results that mean the value is no longer in the store: evicted or removed."""


@dataclass(slots=True)
class MooncakeTierStats(RemoteTierStats):
    """What the Mooncake tier knows; ``refused_stores`` counts stores refused because the segments were full."""

    refused_stores: int = 0


class MooncakeTier(RemoteTier[MooncakeTierStats]):
    """Blocks as Mooncake Store objects named ``kvc:<identity>[:namespace]:<key hex>``, shared by every engine of that store.

    ``host_blocks`` and ``identity`` are :class:`~kvcontract.tiers.remote_tier.RemoteTier`'s;
    the host blocks are registered with the client for the tier's life.
    ``client`` holds where the store is and what this process lends it, as Mooncake's client
    is set up (:class:`~kvcontract.tiers.mooncake.client.MooncakeClientOptions`). ``integrity_key`` seals every value with a
    keyed MAC (:class:`~kvcontract.tiers.remote_tier.RemoteTier`). ``options`` hold what every
    remote tier takes: namespace, threads, lookup and retry timing, a start without the store,
    the bounds on jobs and what the tier keeps (:class:`~kvcontract.tiers.remote_tier.RemoteTierOptions`).
    With a ``job_deadline``, loads are read into the load lane's slot and copied into their host
    blocks once checked, whatever the block size: a get the client has not finished by the deadline
    then writes only into the slot, never into a host block the engine has taken back.
    """

    def __init__(
        self,
        host_blocks: torch.Tensor,
        *,
        identity: BlockIdentity,
        client: MooncakeClientOptions = DEFAULT_CLIENT,
        integrity_key: bytes | None = None,
        options: RemoteTierOptions = DEFAULT_OPTIONS,
    ) -> None:
        check_host_blocks(host_blocks, "MooncakeTier")  # before its rows size the slots (the base checks it too)
        self._row_stride = int(host_blocks.stride(0))
        zero_copy = int(host_blocks.shape[1]) >= ZERO_COPY_FROM
        self._zero_copy = (zero_copy, zero_copy and options.job_deadline is None)
        """Per lane (:data:`_STORE_SLOT`, :data:`_LOAD_SLOT`): whether its blocks skip the slot."""
        self._loads_expire = not self._zero_copy[_LOAD_SLOT]
        mac = value_mac(integrity_key)
        value_bytes = header_size(OffloadKey(bytes(20)), mac) + int(host_blocks.shape[1])
        # A slot always holds one value whatever its key: the header of the longest key beside the batch.
        copied_slot = _BATCH_VALUES * value_bytes + max_header_size(mac)
        self._slot_bytes = tuple(_HEADER_SLOT_BYTES if direct else copied_slot for direct in self._zero_copy)
        self._slots = torch.zeros(sum(self._slot_bytes), dtype=torch.uint8)
        self._slot_view = self._slots.numpy().data
        self._connect = functools.partial(connect, client)
        self._connection: MooncakeConnection | None = None
        super().__init__(
            host_blocks,
            identity=identity,
            name="mooncake tier",
            where=client.master,
            medium=MEDIUM,
            mac=mac,
            options=options,
            stats=MooncakeTierStats(),
        )
        # One put and one get in flight at a time (job_lane says why), each a batch of the jobs
        # queued behind the last; a get never waits behind a put, so loads keep their place.
        self._stores = JobLane(self._pool, WRITE, self._store_jobs, size=_job_size, merge_up_to=_BATCH_VALUES)
        self._loads = JobLane(self._pool, READ, self._load_jobs, size=_job_size, merge_up_to=_BATCH_VALUES)

    def store_key(self, key: OffloadKey) -> str:
        """The Mooncake object name of ``key``: identity and namespace, then the key in hex."""
        return f"{self._prefix}:{key.hex()}"

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        """Nothing to send: Mooncake ranks values for eviction by their own reads and leases."""

    @override
    def _open(self) -> None:
        """Set up a client with the host blocks and the header slots registered for zero-copy transfers."""
        connection = self._connect()
        rows = int(self._host.shape[0])
        span = (rows - 1) * self._row_stride + self._block_bytes if rows else 0
        for pointer, size in ((self._host.data_ptr(), span), (self._slots.data_ptr(), self._slots.numel())):
            code = connection.store.register_buffer(pointer, size)
            if code != OK:
                connection.store.close()
                raise MooncakeUnavailableError(
                    f"Mooncake tier: registering {size} bytes of host memory failed ({describe_code(code)})"
                )
        self._connection = connection

    @override
    def _check(self) -> bool:
        if self._connection is None:
            self._open()
        return self._live_connection().store.health_check() == OK

    @override
    def _close(self) -> None:
        """Unregister the buffers and close the client in the background."""
        connection = self._connection
        if connection is not None:
            connection.store.unregister_buffer(self._slots.data_ptr())
            connection.store.unregister_buffer(self._host.data_ptr())
            # The client's close waits about a second for its heartbeat thread (measured: 1.01 s);
            # nothing of the tier is in use any more, so it runs on a thread of its own.
            threading.Thread(target=connection.store.close, name="mooncake-tier-close", daemon=True).start()

    @override
    def _exists(self, keys: Sequence[OffloadKey]) -> Sequence[bool]:
        replies = self._live_connection().store.batch_is_exist([self.store_key(key) for key in keys])
        fault = next((reply for reply in replies if reply < 0), 0)
        if fault:
            with self._lock:
                self._fault_locked(MasterFaultError(fault), "lookup")
        return [reply == 1 for reply in replies]

    @override
    def _classify(self, error: BaseException) -> Fault | None:
        if isinstance(error, MasterFaultError):
            return Fault.TIMEOUT if error.code == RPC_TIMEOUT else Fault.CONNECTION
        if isinstance(error, ConnectionError):
            return Fault.CONNECTION
        return None

    @override
    def _describe(self, error: BaseException) -> str:
        return str(error) if isinstance(error, MasterFaultError) else super()._describe(error)

    @override
    def _start_store(self, job_id: int, blocks: dict[OffloadKey, int]) -> None:
        self._stores.put(_Job(job_id, list(blocks), list(blocks.values())))

    @override
    def _start_load(self, job_id: int, keys: Sequence[OffloadKey], host_ids: Sequence[int]) -> None:
        self._loads.put(_Job(job_id, keys, host_ids))

    def _row(self, host_id: int) -> int:
        return self._host.data_ptr() + host_id * self._row_stride

    def _slot(self, lane: int) -> tuple[memoryview, int]:
        """The registered slot of a lane (:data:`_STORE_SLOT`, :data:`_LOAD_SLOT`), as a view and its address."""
        start = sum(self._slot_bytes[:lane])
        return self._slot_view[start : start + self._slot_bytes[lane]], self._slots.data_ptr() + start

    def _batches(self, keys: Sequence[OffloadKey], lane: int) -> list[range]:
        """Index ranges of ``keys`` whose headers (and, copying, values) fit the slot of ``lane`` together."""
        copied = 0 if self._zero_copy[lane] else self._block_bytes
        batches: list[range] = []
        start = used = 0
        for i, key in enumerate(keys):
            size = header_size(key, self._mac) + copied
            if used + size > self._slot_bytes[lane]:
                batches.append(range(start, i))
                start, used = i, 0
            used += size
        if start < len(keys):
            batches.append(range(start, len(keys)))
        return batches

    def _store_jobs(self, jobs: Sequence[_Job]) -> None:
        """Put the blocks of ``jobs`` in as few calls as the store lane's slot allows, then report each job.

        While the breaker is open (or the tier shuts down) the jobs fail at once, with no call.
        """
        started = time.perf_counter()
        if self._refuses(len(jobs)):
            for job in jobs:
                self._end_store(job.job_id, job.keys, started, error=None, stored=False)
            return
        codes: list[int] = []
        error: BaseException | None = None
        try:
            codes = self._put([key for job in jobs for key in job.keys], [row for job in jobs for row in job.host_ids])
        except Exception as exc:
            error = exc
        at = 0
        for job in jobs:
            job_codes = codes[at : at + len(job.keys)]
            at += len(job.keys)
            failed = [code for code in job_codes if code not in (OK, OBJECT_ALREADY_EXISTS)]
            job_error = error
            if job_error is None and failed:
                fault = next((code for code in failed if code in MASTER_FAULTS), 0)
                if fault:
                    job_error = MasterFaultError(fault)
                else:
                    self._store_refused(job.job_id, failed)
            stored = not failed and len(job_codes) == len(job.keys)
            # A value already there is not this job's: unchecked, it is not known present (a load checks it).
            found = {key for key, code in zip(job.keys, job_codes) if code == OBJECT_ALREADY_EXISTS}
            self._end_store(job.job_id, job.keys, started, error=job_error, stored=stored, found=found)

    def _put(self, keys: Sequence[OffloadKey], host_ids: Sequence[int]) -> list[int]:
        """Put ``keys`` from ``host_ids``: headers from the store lane's slot, blocks straight from the host blocks or copied beside them; the client's code per key."""
        connection = self._live_connection()
        view, base = self._slot(_STORE_SLOT)
        block_bytes = self._block_bytes
        zero_copy = self._zero_copy[_STORE_SLOT]
        codes: list[int] = []
        for batch in self._batches(keys, _STORE_SLOT):
            names: list[str] = []
            pointers: list[list[int]] = []
            sizes: list[list[int]] = []
            offset = 0
            for i in batch:
                row = host_ids[i]
                payload = memoryview(self._rows[row])
                size = encode_header_into(view[offset:], keys[i], self._fingerprint, payload, self._mac)
                names.append(self.store_key(keys[i]))
                if zero_copy:
                    pointers.append([base + offset, self._row(row)])
                    sizes.append([size, block_bytes])
                else:
                    view[offset + size : offset + size + block_bytes] = payload
                    size += block_bytes
                    pointers.append([base + offset])
                    sizes.append([size])
                offset += size
            if zero_copy:
                codes += connection.store.batch_put_from_multi_buffers(names, pointers, sizes, connection.put_config)
            else:
                codes += connection.store.batch_put_from(
                    names, _firsts(pointers), _firsts(sizes), connection.put_config
                )
        return codes

    def _store_refused(self, job_id: int, failed: Sequence[int]) -> None:
        """Log and count a store the client refused for another reason than the master's silence."""
        if all(code == NO_SPACE for code in failed):
            with self._lock:
                self._counters.refused_stores += 1
        self._log.warning("mooncake tier: store job %d refused: %s", job_id, describe_code(failed[0]))

    def _load_jobs(self, jobs: Sequence[_Job]) -> None:
        """Get the blocks of ``jobs``, each key once, and report each job.

        A key whose value is gone (evicted, removed, its segment left), bad, or unreadable for
        another reason fails its job. Only bad values are removed from the store. A key that jobs
        name twice is fetched once and copied to its other host blocks once checked: the
        client answers a get that names a key twice as two successes but fills one buffer.
        """
        started = time.perf_counter()
        if self._refuses(len(jobs)):
            for job in jobs:
                self._end_load(job.job_id, job.keys, job.host_ids, started, LoadOutcome(refused=True))
            return
        readers: dict[OffloadKey, list[tuple[int, int]]] = {}
        for job in jobs:
            for key, host_id in zip(job.keys, job.host_ids):
                readers.setdefault(key, []).append((job.job_id, host_id))
        found: dict[OffloadKey, int | BadValueError] = {}
        error: BaseException | None = None
        try:
            self._get(readers, found)
        except Exception as exc:
            error = exc
        rejected: set[OffloadKey] = set()
        outcomes = [self._outcome(job, found, error, rejected) for job in jobs]
        bad = [key for outcome in outcomes for key in outcome.bad]
        unreachable = [key for outcome in outcomes for key in outcome.unreachable]
        with self._lock:
            if bad and not self._closed:
                self._pool.submit(BACKGROUND, functools.partial(self._remove, bad))
            if any(found.get(key) == TRANSFER_FAIL for key in unreachable) and not self._closed:
                self._pool.submit(BACKGROUND, functools.partial(self._remove_short, unreachable))
        for job, outcome in zip(jobs, outcomes):
            self._end_load(job.job_id, job.keys, job.host_ids, started, outcome)

    def _get(
        self, readers: dict[OffloadKey, list[tuple[int, int]]], found: dict[OffloadKey, int | BadValueError]
    ) -> None:
        """Get each key of ``readers`` (to its jobs' host blocks) once, checking every value, then copy it to every reader.

        Zero copy, the first reader's host block takes the block and the load lane's slot the
        header; copying, the slot takes both and :meth:`_copy_into` leaves out the jobs past their
        deadline. ``found`` gets the client's result per key asked (negative: no value), or why its value is bad.
        """
        connection = self._live_connection()
        view, base = self._slot(_LOAD_SLOT)
        block_bytes = self._block_bytes
        zero_copy = self._zero_copy[_LOAD_SLOT]
        keys = list(readers)
        for batch in self._batches(keys, _LOAD_SLOT):
            offsets: list[int] = []
            pointers: list[list[int]] = []
            sizes: list[list[int]] = []
            offset = 0
            for i in batch:
                offsets.append(offset)
                size = header_size(keys[i], self._mac)
                if zero_copy:
                    pointers.append([base + offset, self._row(readers[keys[i]][0][1])])
                    sizes.append([size, block_bytes])
                else:
                    size += block_bytes
                    pointers.append([base + offset])
                    sizes.append([size])
                offset += size
            names = [self.store_key(keys[i]) for i in batch]
            if zero_copy:
                results = connection.store.batch_get_into_multi_buffers(names, pointers, sizes)
            else:
                results = connection.store.batch_get_into(names, _firsts(pointers), _firsts(sizes))
            for i, at, result in zip(batch, offsets, results):
                key = keys[i]
                found[key] = result
                if result < 0 and result != TOO_LONG:
                    continue
                size = header_size(key, self._mac)
                first = readers[key][0][1]
                payload = memoryview(self._rows[first]) if zero_copy else view[at + size : at + size + block_bytes]
                try:
                    if result != size + block_bytes:
                        shown = "more" if result < 0 else f"{result} bytes"
                        raise BadValueError(
                            f"holds {shown}, expected {size + block_bytes} bytes",
                            forged=result >= 0 and sealing_differs(view[at : at + min(result, size)], self._mac),
                        )
                    check_value(view[at : at + size], payload, key, self._fingerprint, block_bytes, self._mac)
                except BadValueError as exc:
                    found[key] = exc
                    continue
                for job_id, host_id in readers[key]:
                    if host_id != first or not zero_copy:
                        self._copy_into(job_id, host_id, payload)

    def _outcome(
        self,
        job: _Job,
        found: dict[OffloadKey, int | BadValueError],
        error: BaseException | None,
        rejected: set[OffloadKey],
    ) -> LoadOutcome:
        """What ``job`` found, each key once.

        A bad value is counted and logged once, by the first job of the batch that met it (in
        ``rejected``); a later one fails on it as unreachable.
        """
        outcome = LoadOutcome(error=error)
        fault = 0
        failed: set[OffloadKey] = set()
        for key in job.keys:
            result = found.get(key)
            if isinstance(result, int) and result >= 0:
                continue
            if key in failed:
                continue
            failed.add(key)
            if isinstance(result, BadValueError):
                if key in rejected:
                    outcome.unreachable.append(key)
                else:
                    rejected.add(key)
                    self._reject(outcome, key, result)
            elif result is None:
                if error is None:
                    outcome.unreachable.append(key)
            elif result in _GONE:
                outcome.gone.append(key)
            elif result in MASTER_FAULTS:
                fault = fault or result
            else:
                outcome.unreachable.append(key)
        if outcome.error is None and fault:
            outcome.error = MasterFaultError(fault)
        return outcome

    def _remove(self, keys: Sequence[OffloadKey]) -> None:
        """Remove values that failed their check, so no engine finds them again; a failure is logged only."""
        try:
            self._live_connection().store.batch_remove([self.store_key(key) for key in keys], True)
        except Exception as exc:
            self._log.warning("mooncake tier: removing bad values failed: %s", exc)

    def _remove_short(self, keys: Sequence[OffloadKey]) -> None:
        """Remove the values among ``keys`` whose size is not a block's.

        A value shorter than the buffers of a get fails its transfer (``TRANSFER_FAIL``),
        as a value whose segment left does: the size tells the two apart. With an integrity
        key, a value exactly as long as an unsealed block is counted as forged: a writer without the key.
        """
        try:
            store = self._live_connection().store
            sizes = {key: store.get_size(self.store_key(key)) for key in keys}
            short = [key for key, size in sizes.items() if 0 <= size != header_size(key, self._mac) + self._block_bytes]
        except Exception as exc:
            self._log.warning("mooncake tier: sizing unreadable values failed: %s", exc)
            return
        if short:
            self._log.warning("mooncake tier: values of keys %s are not a block long", [key.hex() for key in short[:4]])
            unsealed = self._block_bytes if self._mac is not None else -1
            forged = sum(sizes[key] == header_size(key) + unsealed for key in short)
            with self._lock:
                self._counters.rejected_values += len(short) - forged
                self._counters.forged_values += forged
            self._remove(short)

    def _live_connection(self) -> MooncakeConnection:
        connection = self._connection
        if connection is None:
            raise MooncakeUnavailableError(f"Mooncake tier: not connected to master {self._where}")
        return connection


class _Job(NamedTuple):
    """A store or load job as a lane runs it: ``keys[i]`` from or to host block ``host_ids[i]``."""

    job_id: int
    keys: Sequence[OffloadKey]
    host_ids: Sequence[int]


def _job_size(job: _Job) -> int:
    return len(job.keys)


def _firsts(buffers: Sequence[Sequence[int]]) -> list[int]:
    """The one buffer of each value, for the client's calls of one buffer per value."""
    return [entry[0] for entry in buffers]
