"""State machine on a real server: random stores, loads, lookups and evictions with faults injected through the server.

The model is what a block must hold: key ``i`` always stores ``pattern(i)`` (keys are
content hashes). Whatever the faults (``CLIENT KILL``, ``FLUSHALL``, ``DEBUG SLEEP`` past
the timeout, a stop and restart, values overwritten or deleted behind the tier's back: the
rules of :class:`tests.tiers.support.RemoteTierMachine` and the server's own faults),
a successful load gives exactly those bytes, a failed load leaves zeros, a key never
stored is never a hit, and the tier recovers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test
from typing_extensions import override

from kvcontract.tiers import RedisTier
from kvcontract.tiers.remote_tier import RemoteTier, RemoteTierOptions, RemoteTierStats
from tests.profiles import stateful_settings
from tests.tiers.redis.support import RedisServer
from tests.tiers.support import REMOTE_IDENTITY, REMOTE_KEYS, RemoteTierMachine, key, remote_key_sets


class RedisTierMachine(RemoteTierMachine):
    """One tier on the module's server; values deleted, clients killed, the server flushed, slept or restarted."""

    server: ClassVar[RedisServer]

    @override
    def make_tier(self, host: torch.Tensor, namespace: str) -> RemoteTier[RemoteTierStats]:
        return RedisTier(
            host,
            identity=REMOTE_IDENTITY,
            url=self.server.url,
            socket_timeout=0.25,
            connect_timeout=0.25,
            options=RemoteTierOptions(namespace=namespace, lookup_timeout=10.0, retry_interval=0.02, io_threads=2),
        )

    @override
    def write_value(self, i: int, value: bytes) -> bool:
        self.server.command("SET", self._name(i), value)
        return True

    def _name(self, i: int) -> bytes:
        tier = self.tier
        assert isinstance(tier, RedisTier)
        return tier.redis_key(key(i))

    @rule(i=st.integers(0, REMOTE_KEYS - 1))
    def delete(self, i: int) -> None:
        self.server.command("DEL", self._name(i))

    @rule()
    def client_kill(self) -> None:
        self.server.command("CLIENT", "KILL", "TYPE", "normal")

    @rule()
    def flushall(self) -> None:
        self.server.command("FLUSHALL")

    @rule(keys=remote_key_sets)
    def debug_sleep_past_the_timeout(self, keys: list[int]) -> None:
        sleeper = threading.Thread(target=self.server.command, args=("DEBUG", "SLEEP", "0.4"))
        sleeper.start()
        time.sleep(0.05)
        self.load(keys)
        self.store_blocks(keys)
        sleeper.join()

    @rule()
    def restart(self) -> None:
        self.server.restart()


@pytest.fixture(scope="module")
def machine_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(Path(tmp_path_factory.mktemp("machine")), "--maxmemory-policy", "allkeys-lru")
    yield server
    server.stop()


def test_loads_are_exact_whatever_the_server_does(machine_server: RedisServer) -> None:
    RedisTierMachine.server = machine_server
    run_state_machine_as_test(RedisTierMachine, settings=stateful_settings(steps=40, fast_examples=8))
