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

What this process knows of the store, the batched lookups (one ``batch_is_exist``), the
breaker and the job bookkeeping are :mod:`kvcontract.tiers.remote_tier`'s. A master that
does not answer (``RPC_FAIL``, ``RPC_TIMEOUT`` after ``timeout``) fails the job it hit and
opens the breaker until the client's health check passes again. Mooncake's client
re-mounts its segment when a restarted master comes back, so the tier recovers without a
restart of the engine.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass

import torch
from typing_extensions import override

from kvcontract.contracts.identity import BlockIdentity
from kvcontract.contracts.keys import OffloadKey
from kvcontract.tiers.host_blocks import check_host_blocks
from kvcontract.tiers.mooncake.client import (
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
    MooncakeConnection,
    MooncakeUnavailableError,
    connect,
    describe_code,
)
from kvcontract.tiers.remote_tier import BACKGROUND, Fault, LoadOutcome, RemoteTier, RemoteTierStats
from kvcontract.tiers.store_value import BadValueError, check_value, encode_header_into, header_size

__all__ = ["MEDIUM", "MooncakeTier", "MooncakeTierStats"]

MEDIUM = "MOONCAKE"
"""The ``medium`` of this tier's events."""

ZERO_COPY_FROM = 256 << 10
"""Blocks of this size or more go straight from and to the host blocks, a value as two buffers (its header, the block).

The client moves each buffer of a value as a transfer of its own, which costs about as much as
copying a few hundred KiB: smaller blocks are copied through the job's slot beside their
header, one buffer per value (64 KiB blocks in jobs of 16: two buffers ran at 0.69 of the raw
client's one, a copy through the slot at 0.87-0.93; at 512 KiB and 2 MiB two buffers keep
up with the raw client).
"""
_HEADER_SLOT_BYTES = 1 << 17
"""One I/O thread's registered slot when the blocks go zero copy: the headers of one batch, and always one key's."""
_COPY_SLOT_VALUES = 64
"""Values of 20-byte keys one I/O thread's slot holds when the blocks are copied, so a job of 64 blocks is one call of the client."""
_MAX_HEADER_BYTES = 65_575
"""The header of the longest key a value can carry: a slot always holds one value whatever its key."""
_GONE = frozenset({OBJECT_NOT_FOUND, SEGMENT_NOT_FOUND})
"""Get results that mean the value is no longer in the store: evicted or removed."""


@dataclass(frozen=True, slots=True)
class MooncakeTierStats(RemoteTierStats):
    """What the Mooncake tier knows; ``refused_stores`` counts stores refused because the segments were full."""

    refused_stores: int = 0


class MooncakeTier(RemoteTier):
    """Blocks as Mooncake Store objects named ``kvc:<identity>[:namespace]:<key hex>``, shared by every engine of that store.

    ``host_blocks``, ``identity`` and ``namespace`` are :class:`~kvcontract.tiers.remote_tier.RemoteTier`'s;
    the host blocks are registered with the client for the tier's life.
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
        check_host_blocks(host_blocks, "MooncakeTier")  # before its rows size the slots (the base checks it too)
        self._row_stride = int(host_blocks.stride(0))
        self._zero_copy = int(host_blocks.shape[1]) >= ZERO_COPY_FROM
        value_bytes = header_size(OffloadKey(bytes(20))) + int(host_blocks.shape[1])
        self._slot_bytes = (
            _HEADER_SLOT_BYTES if self._zero_copy else _COPY_SLOT_VALUES * value_bytes + _MAX_HEADER_BYTES
        )
        self._slots = torch.zeros((io_threads, self._slot_bytes), dtype=torch.uint8)
        self._slot_rows = self._slots.numpy()
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
        self._refused_stores = 0
        # One put and one get in flight at a time: each caller of the client waits for its batch
        # busily, so four I/O threads calling at once cost 2-3x the CPU of one caller for the same
        # bytes (64 KiB blocks, 2 shared cores: 0.32-0.52 of the raw client's CPU, serialized
        # 0.80-0.90). A get never waits behind a put, so loads keep their place before stores.
        self._store_calls = threading.Lock()
        self._load_calls = threading.Lock()
        super().__init__(
            host_blocks,
            identity=identity,
            namespace=namespace,
            name="mooncake tier",
            where=master,
            medium=MEDIUM,
            io_threads=io_threads,
            lookup_timeout=lookup_timeout,
            lookup_wait=lookup_wait,
            retry_interval=retry_interval,
            start_degraded=start_degraded,
        )

    def store_key(self, key: OffloadKey) -> str:
        """The Mooncake object name of ``key``: identity and namespace, then the key in hex."""
        return f"{self._prefix}:{key.hex()}"

    def stats(self) -> MooncakeTierStats:
        """Counters since the tier started."""
        with self._lock:
            return MooncakeTierStats(**vars(self._counters), refused_stores=self._refused_stores)

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

    def _row(self, host_id: int) -> int:
        return self._host.data_ptr() + host_id * self._row_stride

    def _batches(self, keys: Sequence[OffloadKey]) -> list[range]:
        """Index ranges of ``keys`` whose headers (and, copying, values) fit one slot together."""
        copied = 0 if self._zero_copy else self._block_bytes
        batches: list[range] = []
        start = used = 0
        for i, key in enumerate(keys):
            size = header_size(key) + copied
            if used + size > self._slot_bytes:
                batches.append(range(start, i))
                start, used = i, 0
            used += size
        if start < len(keys):
            batches.append(range(start, len(keys)))
        return batches

    @contextlib.contextmanager
    def _slot(self) -> Generator[tuple[memoryview, int]]:
        """This job's registered slot, as a view and its address, until the job is done with it."""
        slot = self._free_slots.get()
        try:
            yield memoryview(self._slot_rows[slot]), self._slots.data_ptr() + slot * self._slot_bytes
        finally:
            self._free_slots.put(slot)

    @override
    def _store_job(self, job_id: int, blocks: dict[OffloadKey, int]) -> None:
        """Put ``blocks`` (key to host block): headers from this job's slot, blocks straight from the host blocks or copied beside them."""
        started = time.perf_counter()
        keys = list(blocks)
        codes: list[int] = []
        error: BaseException | None = None
        block_bytes = self._block_bytes
        try:
            connection = self._live_connection()
            with self._slot() as (view, base):
                for batch in self._batches(keys):
                    names: list[str] = []
                    pointers: list[list[int]] = []
                    sizes: list[list[int]] = []
                    offset = 0
                    for i in batch:
                        row = blocks[keys[i]]
                        payload = memoryview(self._rows[row])
                        size = encode_header_into(view[offset:], keys[i], self._fingerprint, payload)
                        names.append(self.store_key(keys[i]))
                        if self._zero_copy:
                            pointers.append([base + offset, self._row(row)])
                            sizes.append([size, block_bytes])
                        else:
                            view[offset + size : offset + size + block_bytes] = payload
                            pointers.append([base + offset])
                            sizes.append([size + block_bytes])
                            size += block_bytes
                        offset += size
                    with self._store_calls:
                        if self._zero_copy:
                            put = connection.store.batch_put_from_multi_buffers(
                                names, pointers, sizes, connection.put_config
                            )
                        else:
                            put = connection.store.batch_put_from(
                                names, _firsts(pointers), _firsts(sizes), connection.put_config
                            )
                    codes += put
        except Exception as exc:
            error = exc
        failed = [code for code in codes if code not in (OK, OBJECT_ALREADY_EXISTS)]
        if error is None and failed:
            fault = next((code for code in failed if code in MASTER_FAULTS), 0)
            if fault:
                error = MasterFaultError(fault)
            else:
                self._store_refused(job_id, failed)
        self._end_store(job_id, keys, started, error=error, stored=not failed and len(codes) == len(keys))

    def _store_refused(self, job_id: int, failed: Sequence[int]) -> None:
        """Log and count a store the client refused for another reason than the master's silence."""
        if all(code == NO_SPACE for code in failed):
            with self._lock:
                self._refused_stores += 1
        self._log.warning("mooncake tier: store job %d refused: %s", job_id, describe_code(failed[0]))

    @override
    def _load_job(self, job_id: int, keys: Sequence[OffloadKey], host_ids: Sequence[int]) -> None:
        """Get ``keys`` into ``host_ids`` (headers, or whole values when copying, into this job's slot) and check every value.

        A key whose value is gone (evicted, removed, its segment left), bad, or unreadable for
        another reason fails the job. Only bad values are removed from the store.
        """
        started = time.perf_counter()
        outcome = LoadOutcome()
        suspect = 0
        fault = 0
        block_bytes = self._block_bytes
        try:
            connection = self._live_connection()
            with self._slot() as (view, base):
                for batch in self._batches(keys):
                    offsets: list[int] = []
                    pointers: list[list[int]] = []
                    sizes: list[list[int]] = []
                    offset = 0
                    for i in batch:
                        offsets.append(offset)
                        size = header_size(keys[i])
                        if self._zero_copy:
                            pointers.append([base + offset, self._row(host_ids[i])])
                            sizes.append([size, block_bytes])
                        else:
                            pointers.append([base + offset])
                            sizes.append([size + block_bytes])
                            size += block_bytes
                        offset += size
                    names = [self.store_key(keys[i]) for i in batch]
                    with self._load_calls:
                        if self._zero_copy:
                            results = connection.store.batch_get_into_multi_buffers(names, pointers, sizes)
                        else:
                            results = connection.store.batch_get_into(names, _firsts(pointers), _firsts(sizes))
                    for i, at, result in zip(batch, offsets, results):
                        if result in _GONE:
                            outcome.gone.append(keys[i])
                            continue
                        if result in MASTER_FAULTS:
                            fault = fault or result
                            continue
                        if result < 0 and result != TOO_LONG:
                            outcome.unreachable.append(keys[i])
                            suspect += result == TRANSFER_FAIL
                            continue
                        size = header_size(keys[i])
                        row = memoryview(self._rows[host_ids[i]])
                        payload = row if self._zero_copy else view[at + size : at + size + block_bytes]
                        try:
                            if result != size + block_bytes:
                                shown = "more" if result < 0 else f"{result} bytes"
                                raise BadValueError(f"holds {shown}, expected {size + block_bytes} bytes")
                            check_value(view[at : at + size], payload, keys[i], self._fingerprint, block_bytes)
                        except BadValueError as exc:
                            self._reject(outcome, keys[i], exc)
                            continue
                        if not self._zero_copy:
                            row[:] = payload
        except Exception as exc:
            outcome.error = exc
        if outcome.error is None and fault:
            outcome.error = MasterFaultError(fault)
        with self._lock:
            if outcome.bad and not self._closed:
                self._pool.submit(BACKGROUND, functools.partial(self._remove, outcome.bad))
            if suspect and not self._closed:
                self._pool.submit(BACKGROUND, functools.partial(self._remove_short, outcome.unreachable))
        self._end_load(job_id, keys, host_ids, started, outcome)

    def _remove(self, keys: Sequence[OffloadKey]) -> None:
        """Remove values that failed their check, so no engine finds them again; a failure is logged only."""
        try:
            self._live_connection().store.batch_remove([self.store_key(key) for key in keys], True)
        except Exception as exc:
            self._log.warning("mooncake tier: removing bad values failed: %s", exc)

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
            self._log.warning("mooncake tier: sizing unreadable values failed: %s", exc)
            return
        if short:
            self._log.warning("mooncake tier: values of keys %s are not a block long", [key.hex() for key in short[:4]])
            with self._lock:
                self._counters.rejected_values += len(short)
            self._remove(short)

    def _live_connection(self) -> MooncakeConnection:
        connection = self._connection
        if connection is None:
            raise MooncakeUnavailableError(f"Mooncake tier: not connected to master {self._where}")
        return connection


def _firsts(buffers: Sequence[Sequence[int]]) -> list[int]:
    """The one buffer of each value, for the client's calls of one buffer per value."""
    return [entry[0] for entry in buffers]
