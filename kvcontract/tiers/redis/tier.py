"""A secondary tier on Redis (Valkey, or a Redis Cluster) that many engines share.

Redis owns capacity and eviction (``maxmemory`` with ``allkeys-lru``); what this process
knows of it, the batched lookups (one pipeline of EXISTS), the breaker and the job
bookkeeping are :mod:`kvcontract.tiers.remote_tier`'s. Jobs run as pipelined SET or GET in
chunks of about 8 MiB. Every value carries the header of :mod:`kvcontract.tiers.store_value`,
checked on every read: a bad value is a miss, an ``OffloadingEvent(removed=True)`` and a
failed job, never bytes in a host block.

A connection error or timeout fails the job it hit and opens the breaker until a PING
answers again. redis-py reconnects on the next command, so the tier recovers without a
restart of the engine.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
import xxhash
from typing_extensions import override

from kvcontract.contracts.identity import BlockIdentity
from kvcontract.contracts.keys import OffloadKey
from kvcontract.tiers.integrity import value_mac
from kvcontract.tiers.io_pool import BACKGROUND, READ, WRITE
from kvcontract.tiers.redis.client import (
    NO_ACCESS_OPTIONS,
    RedisAccess,
    RedisClient,
    RedisClusterClient,
    RedisPipeline,
    RedisUnavailableError,
    check_pool_size,
    connect,
    describe_error,
)
from kvcontract.tiers.remote_tier import (
    DEFAULT_OPTIONS,
    Fault,
    LoadOutcome,
    RemoteTier,
    RemoteTierOptions,
    RemoteTierStats,
)
from kvcontract.tiers.store_value import BadValueError, decode_value, encode_value_into, header_size

__all__ = ["MEDIUM", "RedisTier", "RedisTierStats"]

MEDIUM = "REDIS"
"""The ``medium`` of this tier's events."""

TAG_GROUPS = 256
"""Hash-tag groups: a key's name carries ``{prefix:gg}``, so Redis Cluster puts it in one of 256 slots."""

_CHUNK_BYTES = 8 << 20
"""Value bytes per pipeline round trip: bounds the memory of a job, costs one round trip per 8 MiB."""

_T = TypeVar("_T")


@dataclass(slots=True)
class RedisTierStats(RemoteTierStats):
    """What the Redis tier knows: payload bytes moved, lookup answers, value checks, faults."""


class RedisTier(RemoteTier[RedisTierStats]):
    """Blocks as Redis values named ``{kvc:<identity>[:namespace]:gg}<key hex>``, shared by every engine using that server.

    ``host_blocks`` and ``identity`` are :class:`~kvcontract.tiers.remote_tier.RemoteTier`'s:
    engines of other models, layouts or ranks on one server live side by side. Give ``url``
    (``redis://127.0.0.1:6379/0``) or ``cluster_nodes`` (``[(host, port), ...]``);
    ``pool_size`` connections (at least ``options.io_threads + 1``). ``ttl_seconds`` expires
    values. ``integrity_key`` seals every value with a keyed MAC
    (:class:`~kvcontract.tiers.remote_tier.RemoteTier`); ``access`` holds the ACL user, its
    password and TLS (:class:`~kvcontract.tiers.redis.client.RedisAccess`). ``options`` hold
    what every remote tier takes: namespace, threads, lookup and retry timing, a start without
    the server, the bounds on jobs and what the tier keeps
    (:class:`~kvcontract.tiers.remote_tier.RemoteTierOptions`).
    """

    def __init__(
        self,
        host_blocks: torch.Tensor,
        *,
        identity: BlockIdentity,
        url: str | None = None,
        cluster_nodes: Sequence[tuple[str, int]] = (),
        socket_timeout: float = 1.0,
        connect_timeout: float = 1.0,
        pool_size: int = 8,
        ttl_seconds: int | None = None,
        integrity_key: bytes | None = None,
        access: RedisAccess = NO_ACCESS_OPTIONS,
        options: RemoteTierOptions = DEFAULT_OPTIONS,
    ) -> None:
        if (url is None) == (not cluster_nodes):
            raise ValueError("RedisTier needs exactly one of url and cluster_nodes")
        check_pool_size(pool_size, options.io_threads)
        self._ttl = ttl_seconds
        self._connect = functools.partial(
            connect,
            url=url,
            cluster_nodes=cluster_nodes,
            socket_timeout=socket_timeout,
            connect_timeout=connect_timeout,
            pool_size=pool_size,
            access=access,
        )
        self._cluster = url is None
        self._client: RedisClient | None = None
        self._buffers = threading.local()
        where = url if url is not None else f"cluster {list(cluster_nodes)}"
        super().__init__(
            host_blocks,
            identity=identity,
            name="redis tier",
            where=where,
            medium=MEDIUM,
            mac=value_mac(integrity_key),
            options=options,
            stats=RedisTierStats(),
        )

    def redis_key(self, key: OffloadKey) -> bytes:
        """The Redis key name of ``key``: identity, namespace and tag group in the hash tag, then the key in hex."""
        group = xxhash.xxh3_64_intdigest(key) % TAG_GROUPS
        return f"{{{self._prefix}:{group:02x}}}{key.hex()}".encode()

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
                self._pool.submit(BACKGROUND, functools.partial(self._touch_keys, present))

    @override
    def _open(self) -> None:
        self._client = self._connect()

    @override
    def _check(self) -> bool:
        if self._client is None:
            self._open()
        else:
            self._client.ping()
        return True

    @override
    def _close(self) -> None:
        if self._client is not None:
            self._client.close()

    @override
    def _exists(self, keys: Sequence[OffloadKey]) -> Sequence[bool]:
        names = [self.redis_key(key) for key in keys]
        return [reply == 1 for reply in self._execute(names, lambda pipe, i: pipe.exists(names[i]))]

    @override
    def _classify(self, error: BaseException) -> Fault | None:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        if isinstance(error, RedisTimeoutError):
            return Fault.TIMEOUT
        if isinstance(error, (RedisConnectionError, OSError)):
            return Fault.CONNECTION
        return None

    @override
    def _describe(self, error: BaseException) -> str:
        return describe_error(error)

    @override
    def _breaks(self) -> bool:
        return not self._cluster

    @override
    def _expires(self, now: float) -> float:
        return now + self._ttl if self._ttl is not None else float("inf")

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

    @override
    def _start_store(self, job_id: int, blocks: dict[OffloadKey, int]) -> None:
        self._pool.submit(WRITE, functools.partial(self._store_job, job_id, blocks))

    @override
    def _start_load(self, job_id: int, keys: Sequence[OffloadKey], host_ids: Sequence[int]) -> None:
        self._pool.submit(READ, functools.partial(self._load_job, job_id, keys, host_ids))

    def _store_job(self, job_id: int, blocks: dict[OffloadKey, int]) -> None:
        """Write ``blocks`` (key to host block) in tag-group order, one pipeline per chunk of about 8 MiB."""
        started = time.perf_counter()
        keys = sorted(blocks, key=self.redis_key)
        if self._refuses():
            self._end_store(job_id, keys, started, error=None, stored=False)
            return
        error: BaseException | None = None
        refused = False
        try:
            for chunk in _chunks(keys, max(1, _CHUNK_BYTES // self._block_bytes)):
                names = [self.redis_key(key) for key in chunk]
                values = self._encode(chunk, blocks)

                def add(pipe: RedisPipeline, i: int) -> None:
                    pipe.set(names[i], values[i], ex=self._ttl)  # noqa: B023  # _execute calls it before the loop moves on

                failed = next((r for r in self._execute(names, add) if isinstance(r, BaseException)), None)
                if failed is not None:
                    self._log.warning("redis tier: store job %d refused: %s", job_id, describe_error(failed))
                    refused = True
                    break
        except Exception as exc:
            error = exc
        self._end_store(job_id, keys, started, error=error, stored=not refused)

    def _encode(self, keys: Sequence[OffloadKey], blocks: dict[OffloadKey, int]) -> list[memoryview]:
        """The values of ``keys``, built one after the other in this thread's reused buffer.

        A fresh buffer per value would fault in new pages for every large block; the
        views stay valid until this thread's next chunk.
        """
        size = sum(header_size(key, self._mac) + self._block_bytes for key in keys)
        buffer: bytearray | None = getattr(self._buffers, "value", None)
        if buffer is None or len(buffer) < size:
            buffer = bytearray(size)
            self._buffers.value = buffer
        view = memoryview(buffer)
        values: list[memoryview] = []
        offset = 0
        for key in keys:
            written = encode_value_into(
                view[offset:], key, self._fingerprint, memoryview(self._rows[blocks[key]]), self._mac
            )
            values.append(view[offset : offset + written])
            offset += written
        return values

    def _load_job(self, job_id: int, keys: Sequence[OffloadKey], host_ids: Sequence[int]) -> None:
        """Read ``keys`` into ``host_ids`` with pipelined GETs, verifying each value before it is copied.

        A key whose value is gone (evicted, flushed) or bad, or whose cluster node failed,
        fails the job; bad values are deleted. A job that reaches its thread while the breaker
        is open fails with no call.
        """
        started = time.perf_counter()
        outcome = LoadOutcome(refused=self._refuses())
        if not outcome.refused:
            try:
                self._read_into(job_id, keys, host_ids, outcome)
            except Exception as exc:
                outcome.error = exc
        if outcome.bad:
            self._delete_bad(outcome.bad)
        self._end_load(job_id, keys, host_ids, started, outcome)

    def _read_into(
        self, job_id: int, keys: Sequence[OffloadKey], host_ids: Sequence[int], outcome: LoadOutcome
    ) -> None:
        """GET ``keys`` chunk by chunk and copy each checked value into its host block; what fails goes in ``outcome``.

        Stops once the job has passed its deadline (its host blocks are no longer its own).
        """
        for chunk in _chunks(range(len(keys)), max(1, _CHUNK_BYTES // self._block_bytes)):
            names = [self.redis_key(keys[i]) for i in chunk]
            replies = self._execute(names, lambda pipe, i: pipe.get(names[i]))  # noqa: B023  # called within _execute
            for i, reply in zip(chunk, replies):
                if isinstance(reply, BaseException):
                    outcome.unreachable.append(keys[i])
                elif reply is None:
                    outcome.gone.append(keys[i])
                else:
                    try:
                        payload = decode_value(
                            _as_bytes(reply), keys[i], self._fingerprint, self._block_bytes, self._mac
                        )
                    except BadValueError as exc:
                        self._reject(outcome, keys[i], exc)
                        continue
                    if not self._copy_into(job_id, host_ids[i], payload):
                        return

    def _delete_bad(self, keys: Sequence[OffloadKey]) -> None:
        """Delete values that failed their check, so no engine finds them again; a failure is logged only."""
        names = [self.redis_key(key) for key in keys]
        try:
            self._execute(names, lambda pipe, i: pipe.delete(names[i]))
        except Exception as exc:
            self._log.warning("redis tier: deleting bad values failed: %s", describe_error(exc))

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


def _chunks(items: Sequence[_T], size: int) -> list[Sequence[_T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _as_bytes(reply: object) -> bytes:
    """A GET reply as bytes; the client is built without response decoding, so anything else is a bad value."""
    if not isinstance(reply, bytes):
        raise BadValueError(f"GET answered {type(reply).__name__}, not bytes")
    return reply
