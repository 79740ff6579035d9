"""Connecting to one Redis server or a Redis Cluster; redis-py is imported here, only when a tier connects.

``import kvcontract`` and ``import kvcontract.tiers`` never import redis, so the package
stays optional (extra ``kvcontract[redis]``). The clients do not retry on their own
(``Retry(NoBackoff(), 0)``): a fault fails the job at once and the tier decides when to
try again, so a dead server costs one timeout per job, not four.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from kvcontract.extras import MissingExtraError

__all__ = [
    "MISSING_EXTRA",
    "RedisClient",
    "RedisClusterClient",
    "RedisPipeline",
    "RedisUnavailableError",
    "connect",
    "describe_error",
]

MISSING_EXTRA = "the Redis tier needs the redis package: pip install 'kvcontract[redis]'"
"""The one error a missing redis-py gives."""


class RedisPipeline(Protocol):
    """The commands the tier pipelines; redis-py's ``Pipeline`` and ``ClusterPipeline`` both have them.

    Declared here because redis-py annotates its cluster classes only in part.
    """

    def set(self, name: bytes, value: bytes | memoryview, ex: int | None = None) -> object: ...

    def get(self, name: bytes) -> object: ...

    def exists(self, name: bytes, /) -> object: ...

    def delete(self, name: bytes, /) -> object: ...

    def touch(self, name: bytes, /) -> object: ...

    def expire(self, name: bytes, time: int) -> object: ...

    def execute(self, raise_on_error: bool = True) -> list[Any]: ...


class RedisClient(Protocol):
    """A client of one server or of a cluster, safe to share between threads."""

    def pipeline(self, transaction: bool = True) -> RedisPipeline: ...

    def ping(self) -> object: ...

    def close(self) -> None: ...


@runtime_checkable
class RedisClusterClient(RedisClient, Protocol):
    """A Redis Cluster client: it also says which node serves a key."""

    def get_node_from_key(self, key: bytes, replica: bool = False) -> Any: ...


class RedisUnavailableError(ConnectionError):
    """The Redis server or cluster a tier was configured with cannot be reached; the message is one line."""


def describe_error(error: BaseException) -> str:
    """One line for a redis-py error: its type and first line."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def connect(
    *,
    url: str | None,
    cluster_nodes: Sequence[tuple[str, int]],
    socket_timeout: float,
    connect_timeout: float,
    pool_size: int,
) -> RedisClient:
    """A client for ``url`` or for the cluster reachable through ``cluster_nodes``, checked with a PING.

    Raises :class:`RedisUnavailableError` when it does not answer, and ``ImportError``
    naming the extra when redis-py is not installed.
    """
    try:
        from redis import BlockingConnectionPool, Redis
        from redis.backoff import NoBackoff
        from redis.cluster import ClusterNode, RedisCluster
        from redis.exceptions import RedisError
        from redis.retry import Retry
    except ImportError:
        raise MissingExtraError(MISSING_EXTRA, extra="redis") from None
    where = url if url is not None else "cluster " + ",".join(f"{h}:{p}" for h, p in cluster_nodes)
    client: RedisClient
    try:
        if url is None:
            client = RedisCluster(
                startup_nodes=[
                    ClusterNode(host, port)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
                    for host, port in cluster_nodes
                ],
                socket_timeout=socket_timeout,
                socket_connect_timeout=connect_timeout,
                max_connections=pool_size,
                require_full_coverage=False,
                retry=Retry(NoBackoff(), 0),
            )
        else:
            pool = BlockingConnectionPool.from_url(  # pyright: ignore[reportUnknownMemberType]  # redis-py leaves **kwargs untyped
                url,
                max_connections=pool_size,
                timeout=connect_timeout,
                socket_timeout=socket_timeout,
                socket_connect_timeout=connect_timeout,
                retry=Retry(NoBackoff(), 0),
            )
            client = Redis(connection_pool=pool)
        _ping(client)
    except (RedisError, OSError, ValueError) as error:
        raise RedisUnavailableError(
            f"Redis tier: cannot reach {where} ({describe_error(error)}); start the server, fix the "
            "address, or set start_degraded: true to start without it"
        ) from None
    return client


def _ping(client: RedisClient) -> None:
    client.ping()
