"""Connecting to one Redis server or a Redis Cluster; redis-py is imported here, only when a tier connects.

``import kvcontract`` and ``import kvcontract.tiers`` never import redis, so the package
stays optional (extra ``kvcontract[redis]``). The clients do not retry on their own
(``Retry(NoBackoff(), 0)``): a fault fails the job at once and the tier decides when to
try again, so a dead server costs one timeout per job, not four.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from kvcontract.extras import MissingExtraError

__all__ = [
    "MISSING_EXTRA",
    "NO_ACCESS_OPTIONS",
    "RedisAccess",
    "RedisClient",
    "RedisClusterClient",
    "RedisPipeline",
    "RedisUnavailableError",
    "check_pool_size",
    "connect",
    "describe_error",
]

MISSING_EXTRA = "the Redis tier needs the redis package: pip install 'kvcontract[redis]'"
"""The one error a missing redis-py gives."""


def check_pool_size(pool_size: int, io_threads: int) -> None:
    """Refuse a pool smaller than the tier's threads need: each I/O thread and the lookup thread hold a connection
    at once, and a thread that found none free would wait out the connect timeout. The one check, for the config and
    the constructor alike."""
    if pool_size < io_threads + 1:
        raise ValueError(
            f"pool_size ({pool_size}) must be at least io_threads + 1 ({io_threads + 1}): "
            "each I/O thread and the lookup thread hold a connection"
        )


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


@dataclass(frozen=True, slots=True)
class RedisAccess:
    """Who the tier is to Redis and how it reaches it privately: an ACL user and password, TLS and its files.

    ``tls`` is for a cluster's nodes (a url says it by its ``rediss://`` scheme); ``tls_ca_file``
    checks the server's certificate (the system's CAs when absent), ``tls_cert_file`` and
    ``tls_key_file`` present a client certificate. The password is never shown.
    """

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    tls_ca_file: Path | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_check_hostname: bool = True

    def options(self, *, url: str | None) -> dict[str, Any]:
        """The keywords of redis-py's clients that say all of this (for ``url``, or a cluster when ``None``)."""
        options: dict[str, Any] = {}  # redis-py types each keyword differently; these are all str, bool or None
        if self.username is not None:
            options["username"] = self.username
        if self.password is not None:
            options["password"] = self.password
        if self.tls or (url is not None and url.startswith("rediss://")):
            if url is None:
                options["ssl"] = True
            options["ssl_cert_reqs"] = "required"
            options["ssl_check_hostname"] = self.tls_check_hostname
            if self.tls_ca_file is not None:
                options["ssl_ca_certs"] = str(self.tls_ca_file)
            if self.tls_cert_file is not None:
                options["ssl_certfile"] = str(self.tls_cert_file)
            if self.tls_key_file is not None:
                options["ssl_keyfile"] = str(self.tls_key_file)
        return options


NO_ACCESS_OPTIONS = RedisAccess()
"""No login and no TLS but what the url says."""


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
    access: RedisAccess | None = None,
) -> RedisClient:
    """A client for ``url`` or for the cluster reachable through ``cluster_nodes``, checked with a PING.

    Raises :class:`RedisUnavailableError` when it does not answer, and ``ImportError``
    naming the extra when redis-py is not installed. ``access`` logs in and sets up TLS.
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
                **(access or NO_ACCESS_OPTIONS).options(url=None),
            )
        else:
            pool = BlockingConnectionPool.from_url(  # pyright: ignore[reportUnknownMemberType]  # redis-py leaves **kwargs untyped
                url,
                max_connections=pool_size,
                timeout=connect_timeout,
                socket_timeout=socket_timeout,
                socket_connect_timeout=connect_timeout,
                retry=Retry(NoBackoff(), 0),
                **(access or NO_ACCESS_OPTIONS).options(url=url),
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
