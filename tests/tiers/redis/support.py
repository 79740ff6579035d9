"""Real Redis servers on loopback ports for the Redis tier tests, and job helpers shared by them.

Servers listen on 127.0.0.1 only, keep nothing on disk and allow DEBUG from loopback, so
tests can inject faults through the server itself (``CLIENT KILL``, ``DEBUG SLEEP``...).
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import torch

from kvcontract import BlockIdentity
from kvcontract.testing import example_identity
from kvcontract.tiers import RedisTier
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.required_parts import skip_unless_required
from tests.tiers.support import BLOCK_BYTES as BLOCK_BYTES
from tests.tiers.support import EVENTS_ON
from tests.tiers.support import HOST_BLOCKS as HOST_BLOCKS
from tests.tiers.support import drain as drain
from tests.tiers.support import fill as fill
from tests.tiers.support import key as key
from tests.tiers.support import load as load
from tests.tiers.support import pattern as pattern
from tests.tiers.support import settle as settle
from tests.tiers.support import store as store

HOST = "127.0.0.1"
IDENTITY = example_identity(BLOCK_BYTES)
"""The block identity of the tests' tiers."""
_START_LIMIT_S = 20.0
"""Guards against a hang only: servers start and jobs finish well within them."""


class MakeTier(Protocol):
    """Builds a tier on the session's server in the test's namespace, unless told otherwise."""

    def __call__(
        self,
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
    ) -> RedisTier: ...


def redis_server_path() -> str | None:
    """``redis-server`` on PATH, or ``None``."""
    return shutil.which("redis-server")


def missing_reason() -> str | None:
    """Why the Redis tests cannot run here (no server binary, no redis-py), or ``None``."""
    if redis_server_path() is None or shutil.which("redis-cli") is None:
        return "redis-server and redis-cli are not on PATH (Debian: apt-get install redis-server)"
    if importlib.util.find_spec("redis") is None:
        return "redis-py is not installed (pip install 'kvcontract[redis]')"
    return None


class Commands(Protocol):
    """What the tests call on a plain client: any command, as redis-cli would send it."""

    def execute_command(self, *args: bytes | str | int | float) -> Any: ...

    def close(self) -> None: ...


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def free_cluster_port() -> int:
    """A free loopback port at most 55535 whose cluster bus port (10,000 higher) is free too."""
    for _ in range(1000):
        port = random.randint(20_000, 55_535)
        if _bindable(port) and _bindable(port + 10_000):
            return port
    raise AssertionError("no free pair of loopback ports for a cluster node")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
        return True


class RedisServer:
    """A ``redis-server`` on a free loopback port, in its own directory, that a test can stop and restart."""

    def __init__(self, workdir: Path, *extra: str, port: int | None = None) -> None:
        self.port: int = port if port is not None else free_port()
        self.workdir = workdir
        self._extra = extra
        self._process: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)
        self.start()

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://{HOST}:{self.port}/0"

    def client(self, socket_timeout: float = 10.0) -> Commands:
        """A plain redis-py client of this server, for checks and fault injection."""
        import redis

        return redis.Redis(host=HOST, port=self.port, socket_timeout=socket_timeout)

    def command(self, *args: bytes | str | int | float) -> Any:
        """Send one command on a new connection (so that killing clients never hits this one)."""
        client = self.client()
        try:
            return client.execute_command(*args)
        finally:
            client.close()

    def start(self) -> None:
        """Start the server and wait until it answers PING."""
        server = redis_server_path()
        assert server is not None, "redis-server is not on PATH"
        command = [
            server,
            "--port",
            str(self.port),
            "--bind",
            HOST,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.workdir),
            "--enable-debug-command",
            "local",
            "--logfile",
            "server.log",
            *self._extra,
        ]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        deadline = time.monotonic() + _START_LIMIT_S
        while True:
            try:
                if self.command("PING"):
                    return
            except redis.ConnectionError:
                pass
            assert self._process.poll() is None, f"redis-server on port {self.port} exited at start"
            assert time.monotonic() < deadline, f"redis-server on port {self.port} never answered"
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the server (its data is gone: nothing is saved)."""
        if self._process is not None and self._process.poll() is None:
            os.kill(self._process.pid, signal.SIGCONT)  # a frozen server takes SIGTERM only once it runs
            self._process.terminate()
            self._process.wait(timeout=_START_LIMIT_S)
        self._process = None

    def freeze(self) -> None:
        """Stop the server with SIGSTOP, as a stuck VM or a long fork would: connections stay open, nothing answers."""
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """Let a frozen server run again (SIGCONT)."""
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGCONT)

    def restart(self) -> None:
        """Stop, then start again on the same port, empty."""
        self.stop()
        self.start()


class RedisClusterServers:
    """Three cluster-enabled masters on loopback ports, joined with ``redis-cli --cluster create``."""

    def __init__(self, workdir: Path) -> None:
        options = (
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            "1000",
            "--cluster-require-full-coverage",
            "no",
        )
        self.nodes = [
            RedisServer(workdir / f"node{i}", *options, "--cluster-config-file", "nodes.conf", port=free_cluster_port())
            for i in range(3)
        ]
        cli = shutil.which("redis-cli")
        assert cli is not None, "redis-cli is not on PATH (it comes with redis-server)"
        addresses = [f"{HOST}:{node.port}" for node in self.nodes]
        subprocess.run(
            [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        deadline = time.monotonic() + _START_LIMIT_S
        while not all(_cluster_ok(node) for node in self.nodes):
            assert time.monotonic() < deadline, "the cluster never reached cluster_state:ok"
            time.sleep(0.05)

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """``(host, port)`` of every master."""
        return [(HOST, node.port) for node in self.nodes]

    def stop(self) -> None:
        """Stop every node."""
        for node in self.nodes:
            node.stop()


def _cluster_ok(node: RedisServer) -> bool:
    info = node.command("CLUSTER", "INFO")
    text = info.decode() if isinstance(info, bytes) else str(info)
    return "cluster_state:ok" in text


def job_counter() -> Iterator[int]:
    """Job ids for one test."""
    return itertools.count(1)


def redis_config(url: str, namespace: str) -> dict[str, object]:
    """A tiering config of the `tiny` layout with a small host memory over one Redis tier."""
    return {
        "kv_layout": {"preset": "tiny", "block_tokens": 16, "offload_block_tokens": 16},
        "manager": {
            "kind": "tiering",
            "primary": {"kind": "cpu", "capacity": 64, "policy": {"kind": "lru"}},
            "secondary": [{"kind": "redis", "url": url, "namespace": namespace, "lookup_timeout": 5.0}],
        },
    }


def lru_server_or_skip(directory: Path) -> RedisServer:
    """A server in ``directory`` with Redis owning eviction (``allkeys-lru``), or a skip (a failure under ``KVCONTRACT_REQUIRE=redis``) without Redis."""
    reason = missing_reason()
    if reason is not None:
        skip_unless_required("redis", reason)
    return RedisServer(directory, "--maxmemory-policy", "allkeys-lru")
