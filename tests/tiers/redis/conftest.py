"""Fixtures of the Redis tier tests: fresh servers per test session, tiers that shut down after the test.

Without ``redis-server`` or redis-py the test modules here are not collected and
``test_requirements.py`` skips with the one reason; ``KVCONTRACT_REQUIRE=redis`` (CI)
makes that skip a failure.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from kvcontract import BlockIdentity
from kvcontract.testing import example_identity
from kvcontract.tiers import RedisTier
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.tiers.redis.support import MakeTier, RedisClusterServers, RedisServer, missing_reason
from tests.tiers.support import EVENTS_ON

collect_ignore_glob = [] if missing_reason() is None else ["test_redis_*.py"]
_namespaces = itertools.count()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One server for the session, with Redis owning eviction (``allkeys-lru``)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"), "--maxmemory-policy", "allkeys-lru")
    yield server
    server.stop()


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of the test's own, which the test may stop, restart or fill."""
    server = RedisServer(tmp_path / "redis", "--maxmemory-policy", "allkeys-lru")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    """Three masters joined into a cluster, for the session."""
    cluster = RedisClusterServers(tmp_path_factory.mktemp("cluster"))
    yield cluster
    cluster.stop()


@pytest.fixture
def make_tier(redis_server: RedisServer, host: torch.Tensor) -> Iterator[MakeTier]:
    """Builds tiers on the session server in the test's own namespace; all are shut down after the test."""
    tiers: list[RedisTier] = []
    default_namespace = f"t{next(_namespaces)}"

    def make(
        *,
        url: str | None = None,
        cluster_nodes: Sequence[tuple[str, int]] = (),
        namespace: str | None = None,
        host_blocks: torch.Tensor | None = None,
        identity: BlockIdentity | None = None,
        socket_timeout: float = 2.0,
        lookup_timeout: float = 10.0,
        ttl_seconds: int | None = None,
        io_threads: int = 2,
        start_degraded: bool = False,
        integrity_key: bytes | None = None,
        options: RemoteTierOptions = EVENTS_ON,
    ) -> RedisTier:
        blocks = host if host_blocks is None else host_blocks
        tier = RedisTier(
            blocks,
            identity=identity if identity is not None else example_identity(int(blocks.shape[1])),
            url=None if cluster_nodes else url or redis_server.url,
            cluster_nodes=cluster_nodes,
            socket_timeout=socket_timeout,
            connect_timeout=socket_timeout,
            ttl_seconds=ttl_seconds,
            integrity_key=integrity_key,
            options=replace(
                options,
                namespace=namespace or default_namespace,
                lookup_timeout=lookup_timeout,
                io_threads=io_threads,
                retry_interval=0.05,
                start_degraded=start_degraded,
            ),
        )
        tiers.append(tier)
        return tier

    yield make
    for tier in tiers:
        tier.shutdown()
