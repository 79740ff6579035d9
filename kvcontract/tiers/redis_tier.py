"""A secondary tier on Redis (Valkey, or a Redis Cluster) that many engines share.

Redis owns capacity and eviction (``maxmemory`` with ``allkeys-lru``): the tier keeps no
index of its own, only what this process knows, so a key Redis evicted is a miss when it
is loaded. Jobs run on a thread pool (loads before stores) as pipelined SET or GET in
chunks of about 8 MiB, so the scheduler never waits on the network. A lookup of a key
this process has not seen queues the key for the lookup thread, which sends every key
queued since its last batch as one pipeline of EXISTS; the lookup answers ``RETRY`` until
the answer lands and ``MISS`` after ``lookup_timeout``. Every value carries the header of
:mod:`kvcontract.tiers.store_value`, checked on every read: a bad value is a miss, an
``OffloadingEvent(removed=True)`` and a failed job, never bytes in a host block.

A connection error or timeout fails the job it hit (host blocks of a failed load are
zero-filled, stored keys are not marked readable) and opens a breaker: until a PING
answers again, lookups say ``MISS`` and submits return ``False`` at once, instead of each
job waiting out the timeout. redis-py reconnects on the next command, so the tier
recovers without a restart of the engine.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
import xxhash
from typing_extensions import override

from kvcontract.contracts.identity import BlockIdentity
from kvcontract.contracts.keys import OffloadKey
from kvcontract.contracts.request import LookupResult
from kvcontract.contracts.tier import SecondaryTier, TierJob
from kvcontract.contracts.values import OffloadingEvent, TransferResult
from kvcontract.tiers.host_blocks import check_host_block_ids, check_host_blocks, check_identity_block_bytes
from kvcontract.tiers.integrity import MismatchLog
from kvcontract.tiers.io_pool import PriorityThreadPool
from kvcontract.tiers.redis_client import (
    RedisClient,
    RedisClusterClient,
    RedisPipeline,
    RedisUnavailableError,
    connect,
    describe_error,
)
from kvcontract.tiers.store_value import BadValueError, decode_value, encode_value_into, header_size

__all__ = ["MEDIUM", "RedisTier", "RedisTierStats"]

MEDIUM = "REDIS"
"""The ``medium`` of this tier's events."""

TAG_GROUPS = 256
"""Hash-tag groups: a key's name carries ``{prefix:gg}``, so Redis Cluster puts it in one of 256 slots."""
PREFIX_FINGERPRINT_DIGITS = 16
"""Hex digits of the identity's fingerprint in every key name: 64 bits keep identities apart; the value holds all 128."""

_READ = 0
_WRITE = 1
_BACKGROUND = 2
"""Pool priorities: loads, then stores, then touches and reconnection probes."""
_CHUNK_BYTES = 8 << 20
"""Value bytes per pipeline round trip: bounds the memory of a job, costs one round trip per 8 MiB."""
_LOOKUP_BATCH = 4096
_KNOWN_KEYS = 1 << 20
"""Keys known present that this process remembers (LRU); forgotten ones are asked again."""

_log = logging.getLogger(__name__)
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class RedisTierStats:
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
    timeouts: int = 0
    connection_errors: int = 0
    reconnects: int = 0
    failed_jobs: int = 0


class RedisTier(SecondaryTier):
    """Blocks as Redis values named ``{kvc:<identity>[:namespace]:gg}<key hex>``, shared by every engine using that server.

    ``host_blocks`` is the host memory that job host block ids index: a 2-D ``torch.uint8``
    CPU tensor ``(num_host_blocks, bytes_per_block)``; the caller keeps a job's host blocks
    reserved until :meth:`get_finished` reports the job. ``identity`` is this engine's block
    identity: the first 16 hex digits of its fingerprint name every key, so engines of other
    models, layouts or ranks on one server live side by side, and all of it is in every
    value, so a value of another identity is a miss, never bytes in a host block.
    ``namespace`` (optional) scopes keys further, within the identity, never across it. Give ``url``
    (``redis://127.0.0.1:6379/0``) or ``cluster_nodes`` (``[(host, port), ...]``).
    ``ttl_seconds`` expires values; ``start_degraded`` starts the tier even when the server
    does not answer, retrying every ``retry_interval`` seconds.
    """

    def __init__(
        self,
        host_blocks: torch.Tensor,
        *,
        identity: BlockIdentity,
        url: str | None = None,
        cluster_nodes: Sequence[tuple[str, int]] = (),
        namespace: str | None = None,
        socket_timeout: float = 1.0,
        connect_timeout: float = 1.0,
        pool_size: int = 8,
        ttl_seconds: int | None = None,
        io_threads: int = 4,
        lookup_timeout: float = 0.1,
        lookup_wait: float = 0.0,
        retry_interval: float = 1.0,
        start_degraded: bool = False,
    ) -> None:
        if (url is None) == (not cluster_nodes):
            raise ValueError("RedisTier needs exactly one of url and cluster_nodes")
        if pool_size < io_threads + 1:
            raise ValueError(
                f"RedisTier pool_size {pool_size} is below io_threads + 1 ({io_threads + 1}): "
                "each I/O thread and the lookup thread hold a connection"
            )
        check_host_blocks(host_blocks, "RedisTier")
        check_identity_block_bytes(identity, host_blocks, "RedisTier")
        self._host = host_blocks
        self._rows = host_blocks.numpy()
        self._block_bytes = int(host_blocks.shape[1])
        self._identity = identity
        self._fingerprint = identity.fingerprint
        self._namespace = namespace
        self._prefix = f"kvc:{identity.fingerprint_hex[:PREFIX_FINGERPRINT_DIGITS]}" + (f":{namespace}" if namespace else "")
        self._ttl = ttl_seconds
        self._lookup_timeout = lookup_timeout
        self._lookup_wait = lookup_wait
        self._retry_interval = retry_interval
        self._connect = functools.partial(
            connect,
            url=url,
            cluster_nodes=cluster_nodes,
            socket_timeout=socket_timeout,
            connect_timeout=connect_timeout,
            pool_size=pool_size,
        )
        self._where = url if url is not None else f"cluster {list(cluster_nodes)}"
        self._cluster = url is None
        self._client: RedisClient | None = None
        try:
            self._client = self._connect()
        except RedisUnavailableError:
            if not start_degraded:
                raise
            _log.warning("redis tier: %s does not answer; starting degraded", self._where)
        self._lock = threading.Lock()
        self._answered = threading.Condition(self._lock)
        self._counters = _Counters()
        self._mismatches = MismatchLog(_log, f"redis tier at {self._where}", identity.fingerprint_hex)
        self._known: OrderedDict[OffloadKey, float] = OrderedDict()
        self._storing: dict[OffloadKey, int] = {}
        self._asking: dict[OffloadKey, float] = {}
        self._absent: dict[OffloadKey, float] = {}
        self._queued: list[OffloadKey] = []
        self._events: list[OffloadingEvent] = []
        self._finished: list[TransferResult] = []
        self._active_jobs: set[int] = set()
        self._healthy = self._client is not None
        self._probing = False
        self._last_probe = -float("inf")
        self._closed = False
        self._buffers = threading.local()
        self._pool = PriorityThreadPool(io_threads, name="redis-tier")
        self._lookup_thread = threading.Thread(target=self._lookup_loop, name="redis-tier-lookup", daemon=True)
        self._lookup_thread.start()

    @override
    def __repr__(self) -> str:
        return f"RedisTier({self._where!r}, prefix={self._prefix!r})"

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
        """Whether the last contact with the server succeeded (else lookups miss and submits refuse)."""
        return self._healthy

    def redis_key(self, key: OffloadKey) -> bytes:
        """The Redis key name of ``key``: identity, namespace and tag group in the hash tag, then the key in hex."""
        group = xxhash.xxh3_64_intdigest(key) % TAG_GROUPS
        return f"{{{self._prefix}:{group:02x}}}{key.hex()}".encode()

    def stats(self) -> RedisTierStats:
        """Counters since the tier started."""
        with self._lock:
            return RedisTierStats(**vars(self._counters))

    @override
    def lookup(self, key: OffloadKey) -> LookupResult:
        """``HIT`` if known present, ``HIT_PENDING`` while this process stores it, else ask Redis.

        A key not known is queued for the next EXISTS batch and answered ``RETRY``; the
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
        expires = self._known.get(key)
        if expires is not None:
            if expires > now:
                self._known.move_to_end(key)
                return LookupResult.HIT
            del self._known[key]
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

        ``False`` (nothing started) once shut down or while the server does not answer.
        """
        check_host_block_ids(job, self._host, "RedisTier")
        now = time.monotonic()
        with self._lock:
            if not self._accepting(now):
                return False
            self._claim(job.job_id)
            new: dict[OffloadKey, int] = {}
            for key, host_id in zip(job.keys, job.host_block_ids):
                if key in new or key in self._storing or self._known.get(key, 0.0) > now:
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

        ``False`` (nothing started) once shut down, while the server does not answer, or
        when a key is not known present (:meth:`lookup` would not say ``HIT``).
        """
        check_host_block_ids(job, self._host, "RedisTier")
        now = time.monotonic()
        with self._lock:
            if not self._accepting(now):
                return False
            if any(self._known.get(key, 0.0) <= now for key in job.keys):
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
        """Refresh Redis's LRU clock (and the TTL) of the keys known present, in the background."""
        now = time.monotonic()
        with self._lock:
            if not self._healthy or self._closed:
                return
            present = [key for key in keys if self._known.get(key, 0.0) > now]
            if self._ttl is not None:
                for key in present:
                    self._known[key] = now + self._ttl
            if present:
                self._pool.submit(_BACKGROUND, functools.partial(self._touch_keys, present))

    @override
    def take_events(self) -> list[OffloadingEvent]:
        """Blocks stored, and blocks found gone or bad, since the last call."""
        with self._lock:
            events, self._events = self._events, []
        return events

    @override
    def shutdown(self) -> None:
        """Refuse new jobs, finish those in flight, stop the threads and close the connections."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._answered.notify_all()
        self._pool.shutdown()
        self._lookup_thread.join()
        if self._client is not None:
            self._client.close()

    def _accepting(self, now: float) -> bool:
        """Whether jobs may start; probes the server when it is down. Lock held."""
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

    def _execute(self, names: Sequence[bytes], add: Callable[[RedisPipeline, int], object]) -> list[object]:
        """One pipelined command per name (``add(pipe, i)`` for ``names[i]``); the replies in order, a failed command's as its exception.

        One server: one pipeline, and an error of the connection raises. A cluster: one
        pipeline per node, so a node that is down fails only its own keys (each reply an
        exception) and never stops the tier.
        """
        client = self._client
        if client is None:
            raise RedisUnavailableError(f"Redis tier: not connected to {self._where}")
        if not self._cluster:
            pipe = client.pipeline(transaction=False)
            for i in range(len(names)):
                add(pipe, i)
            return pipe.execute(raise_on_error=False)
        return self._execute_by_node(client, names, add)

    def _execute_by_node(
        self, client: RedisClient, names: Sequence[bytes], add: Callable[[RedisPipeline, int], object]
    ) -> list[object]:
        if not isinstance(client, RedisClusterClient):
            raise TypeError(f"{self!r} is configured for a cluster but holds a client of one server")
        by_node: dict[str, list[int]] = {}
        for i, name in enumerate(names):
            by_node.setdefault(str(client.get_node_from_key(name).name), []).append(i)
        replies: list[object] = [None] * len(names)
        for node, indexes in by_node.items():
            pipe = client.pipeline(transaction=False)
            for i in indexes:
                add(pipe, i)
            try:
                answered: list[object] = pipe.execute(raise_on_error=False)
            except Exception as exc:
                with self._lock:
                    self._fault_locked(exc, f"cluster node {node}")
                answered = [exc] * len(indexes)
            for i, reply in zip(indexes, answered):
                replies[i] = reply
        return replies

    def _store_job(self, job_id: int, blocks: dict[OffloadKey, int]) -> None:
        """Write ``blocks`` (key to host block) in tag-group order, one pipeline per chunk of about 8 MiB."""
        started = time.perf_counter()
        keys = sorted(blocks, key=self.redis_key)
        error: BaseException | None = None
        refused = False
        try:
            for chunk in _chunks(keys, max(1, _CHUNK_BYTES // self._block_bytes)):
                names = [self.redis_key(key) for key in chunk]
                values = self._encode(chunk, blocks)

                def add(pipe: RedisPipeline, i: int) -> None:
                    pipe.set(names[i], values[i], ex=self._ttl)

                failed = next((r for r in self._execute(names, add) if isinstance(r, BaseException)), None)
                if failed is not None:
                    _log.warning("redis tier: store job %d refused: %s", job_id, describe_error(failed))
                    refused = True
                    break
        except Exception as exc:
            error = exc
        seconds = time.perf_counter() - started
        expires = time.monotonic() + self._ttl if self._ttl is not None else float("inf")
        with self._lock:
            for key in keys:
                if self._storing.get(key) == job_id:
                    del self._storing[key]
            if error is not None:
                self._fault_locked(error, f"store job {job_id}")
            if error is not None or refused:
                self._finish(job_id, False, 0, seconds)
                return
            for key in keys:
                self._remember(key, expires)
            self._counters.bytes_written += len(keys) * self._block_bytes
            self._events.append(OffloadingEvent(keys, MEDIUM, removed=False))
            self._finish(job_id, True, len(keys) * self._block_bytes, seconds)

    def _encode(self, keys: Sequence[OffloadKey], blocks: dict[OffloadKey, int]) -> list[memoryview]:
        """The values of ``keys``, built one after the other in this thread's reused buffer.

        A fresh buffer per value would fault in new pages for every large block; the
        views stay valid until this thread's next chunk.
        """
        size = sum(header_size(key) + self._block_bytes for key in keys)
        buffer: bytearray | None = getattr(self._buffers, "value", None)
        if buffer is None or len(buffer) < size:
            buffer = bytearray(size)
            self._buffers.value = buffer
        view = memoryview(buffer)
        values: list[memoryview] = []
        offset = 0
        for key in keys:
            written = encode_value_into(view[offset:], key, self._fingerprint, memoryview(self._rows[blocks[key]]))
            values.append(view[offset : offset + written])
            offset += written
        return values

    def _load_job(self, job_id: int, keys: Sequence[OffloadKey], host_ids: Sequence[int]) -> None:
        """Read ``keys`` into ``host_ids`` with pipelined GETs, verifying each value before it is copied.

        A key whose value is gone (evicted, flushed) or bad, or whose cluster node failed,
        is forgotten with a removed event; any of them fails the job, whose host blocks
        are then all zero-filled.
        """
        started = time.perf_counter()
        gone: list[OffloadKey] = []
        bad: list[OffloadKey] = []
        unreachable: list[OffloadKey] = []
        checksum_failures = 0
        mismatches = 0
        error: BaseException | None = None
        try:
            for chunk in _chunks(range(len(keys)), max(1, _CHUNK_BYTES // self._block_bytes)):
                names = [self.redis_key(keys[i]) for i in chunk]
                replies = self._execute(names, lambda pipe, i: pipe.get(names[i]))
                for i, reply in zip(chunk, replies):
                    if isinstance(reply, BaseException):
                        unreachable.append(keys[i])
                    elif reply is None:
                        gone.append(keys[i])
                    else:
                        try:
                            payload = decode_value(_as_bytes(reply), keys[i], self._fingerprint, self._block_bytes)
                        except BadValueError as exc:
                            if exc.identity_mismatch:
                                self._mismatches.record(f"the value of key {keys[i].hex()}")
                            else:
                                _log.warning("redis tier: value of key %s is bad: %s", keys[i].hex(), exc)
                            bad.append(keys[i])
                            checksum_failures += exc.checksum_failed
                            mismatches += exc.identity_mismatch
                            continue
                        memoryview(self._rows[host_ids[i]])[:] = payload
        except Exception as exc:
            error = exc
        success = error is None and not gone and not bad and not unreachable
        if not success:
            for host_id in host_ids:
                self._host[host_id].zero_()
        if bad:
            self._delete_bad(bad)
        seconds = time.perf_counter() - started
        with self._lock:
            lost = [*gone, *bad, *unreachable]
            for key in lost:
                self._known.pop(key, None)
            if lost:
                self._events.append(OffloadingEvent(lost, MEDIUM, removed=True))
            self._counters.evicted += len(gone)
            self._counters.checksum_failures += checksum_failures
            self._counters.rejected_values += len(bad) - checksum_failures - mismatches
            self._counters.identity_mismatches += mismatches
            if error is not None:
                self._fault_locked(error, f"load job {job_id}")
            transferred = len(keys) * self._block_bytes if success else 0
            self._counters.bytes_read += transferred
            self._finish(job_id, success, transferred, seconds)

    def _delete_bad(self, keys: Sequence[OffloadKey]) -> None:
        """Delete values that failed their check, so no engine finds them again; a failure is logged only."""
        names = [self.redis_key(key) for key in keys]
        try:
            self._execute(names, lambda pipe, i: pipe.delete(names[i]))
        except Exception as exc:
            _log.warning("redis tier: deleting bad values failed: %s", describe_error(exc))

    def _touch_keys(self, keys: Sequence[OffloadKey]) -> None:
        """Refresh the LRU clock (TOUCH) or the TTL (EXPIRE) of ``keys``."""
        names = [self.redis_key(key) for key in keys]
        ttl = self._ttl
        try:
            if ttl is None:
                self._execute(names, lambda pipe, i: pipe.touch(names[i]))
            else:
                self._execute(names, lambda pipe, i: pipe.expire(names[i], ttl))
        except Exception as exc:
            with self._lock:
                self._fault_locked(exc, "touch")

    def _lookup_loop(self) -> None:
        """Send the keys queued since the last batch as one pipeline of EXISTS, until shutdown."""
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
        replies: list[object] = []
        error: BaseException | None = None
        names = [self.redis_key(key) for key in batch]
        try:
            replies = self._execute(names, lambda pipe, i: pipe.exists(names[i]))
        except Exception as exc:
            error = exc
        now = time.monotonic()
        expires = now + self._ttl if self._ttl is not None else float("inf")
        with self._lock:
            if error is not None:
                self._fault_locked(error, "lookup")
            for i, key in enumerate(batch):
                if self._asking.pop(key, None) is None:
                    continue
                reply = replies[i] if i < len(replies) else None
                if reply == 1:
                    if key not in self._storing:
                        self._remember(key, expires)
                else:
                    self._absent[key] = now
            if len(self._absent) > _LOOKUP_BATCH:
                horizon = now - self._lookup_timeout
                self._absent = {k: t for k, t in self._absent.items() if t >= horizon}
            self._answered.notify_all()

    def _remember(self, key: OffloadKey, expires: float) -> None:
        """Know ``key`` present until ``expires``; the least recently used beyond the bound are forgotten. Lock held."""
        self._known[key] = expires
        self._known.move_to_end(key)
        if len(self._known) > _KNOWN_KEYS:
            self._known.popitem(last=False)

    def _fault_locked(self, error: BaseException, what: str) -> None:
        """Count a failed command; a connection error or timeout of the one server opens the breaker. Lock held.

        A cluster has no breaker: a node that is down fails only the keys it serves.
        """
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        _log.warning("redis tier: %s failed: %s", what, describe_error(error))
        if isinstance(error, RedisTimeoutError):
            self._counters.timeouts += 1
        elif isinstance(error, (RedisConnectionError, OSError)):
            self._counters.connection_errors += 1
        else:
            return
        if not self._cluster:
            self._healthy = False

    def _probe_locked(self, now: float) -> None:
        """Queue a PING (or a connect) at most every ``retry_interval`` seconds while unhealthy. Lock held."""
        if self._probing or self._closed or now - self._last_probe < self._retry_interval:
            return
        self._probing = True
        self._last_probe = now
        self._pool.submit(_BACKGROUND, self._probe)

    def _probe(self) -> None:
        ok = False
        try:
            if self._client is None:
                self._client = self._connect()
            else:
                self._client.ping()
            ok = True
        except Exception as exc:
            _log.info("redis tier: %s still does not answer: %s", self._where, describe_error(exc))
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


def _chunks(items: Sequence[_T], size: int) -> list[Sequence[_T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _as_bytes(reply: object) -> bytes:
    """A GET reply as bytes; the client is built without response decoding, so anything else is a bad value."""
    if not isinstance(reply, bytes):
        raise BadValueError(f"GET answered {type(reply).__name__}, not bytes")
    return reply
