"""State machine on a real server: random stores, loads, lookups and evictions with faults injected through the server.

The model is what a block must hold: key ``i`` always stores ``pattern(i)`` (keys are
content hashes). Whatever the faults (``CLIENT KILL``, ``FLUSHALL``, ``DEBUG SLEEP`` past
the timeout, a stop and restart, values overwritten or deleted behind the tier's back),
a successful load gives exactly those bytes, a failed load leaves zeros, a key never
stored is never a hit, and the tier recovers.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test
from typing_extensions import override

from kvcontract import LookupResult, TierJob
from kvcontract.tiers import RedisTier
from kvcontract.testing import example_identity
from kvcontract.tiers.store_value import encode_value
from tests.profiles import stateful_settings
from tests.tiers.redis.support import RedisServer, drain, key, pattern, settle

BYTES = 256
IDENTITY = example_identity(BYTES)
KEYS = 8
HOST_BLOCKS = 4
_RECOVER_LIMIT_S = 30.0
"""Guard against a hang only: the tier probes every 20 ms."""

key_sets = st.lists(st.integers(0, KEYS - 1), min_size=1, max_size=HOST_BLOCKS, unique=True)
damages = st.sampled_from(["garbage", "short", "flipped", "other-key", "fingerprint", "deleted"])


def _content(i: int) -> torch.Tensor:
    return pattern(i, BYTES)


class RedisTierMachine(RuleBasedStateMachine):
    """One tier on the shared server, in a fresh namespace per example."""

    server: ClassVar[RedisServer]
    namespaces: ClassVar[Iterator[int]] = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.host = torch.zeros((HOST_BLOCKS, BYTES), dtype=torch.uint8)
        self.tier = RedisTier(
            self.host,
            identity=IDENTITY,
            url=self.server.url,
            namespace=f"machine{next(self.namespaces)}",
            socket_timeout=0.25,
            connect_timeout=0.25,
            lookup_timeout=10.0,
            retry_interval=0.02,
            io_threads=2,
        )
        self.jobs = itertools.count(1)
        self.ever_written: set[int] = set()

    @rule(keys=key_sets)
    def store(self, keys: list[int]) -> None:
        for row, i in enumerate(keys):
            self.host[row].copy_(_content(i))
        job = next(self.jobs)
        if not self.tier.submit_store(TierJob(job, [key(i) for i in keys], list(range(len(keys))))):
            return
        self.ever_written.update(keys)
        drain(self.tier, [job])

    @rule(keys=key_sets)
    def load(self, keys: list[int]) -> None:
        answers = [settle(self.tier, key(i)) for i in keys]
        if any(answer is not LookupResult.HIT for answer in answers):
            return
        self.host.fill_(0xAA)
        job = next(self.jobs)
        if not self.tier.submit_load(TierJob(job, [key(i) for i in keys], list(range(len(keys))))):
            return
        result = drain(self.tier, [job])[job]
        for row, i in enumerate(keys):
            if result.success:
                assert torch.equal(self.host[row], _content(i)), f"key {i} loaded other bytes"
            else:
                assert not self.host[row].any(), "a failed load leaves zeros"

    @rule(i=st.integers(0, KEYS - 1))
    def lookup(self, i: int) -> None:
        if settle(self.tier, key(i)) is LookupResult.HIT:
            assert i in self.ever_written, f"nothing was ever written under key {i}, yet it is a hit"

    @rule(i=st.integers(0, KEYS - 1), damage=damages)
    def overwrite(self, i: int, damage: str) -> None:
        name = self.tier.redis_key(key(i))
        if damage == "deleted":
            self.server.command("DEL", name)
            return
        good = encode_value(key(i), IDENTITY.fingerprint, memoryview(_content(i).numpy().tobytes()))
        values = {
            "garbage": b"garbage",
            "short": good[:-1],
            "flipped": good[:-1] + bytes([good[-1] ^ 0xFF]),
            "other-key": encode_value(key(i + 1), IDENTITY.fingerprint, memoryview(_content(i + 1).numpy().tobytes())),
            "fingerprint": encode_value(key(i), example_identity(IDENTITY.block_bytes, model="other").fingerprint, memoryview(_content(i + 1).numpy().tobytes())),
        }
        self.server.command("SET", name, values[damage])
        self.ever_written.add(i)

    @rule()
    def client_kill(self) -> None:
        self.server.command("CLIENT", "KILL", "TYPE", "normal")

    @rule()
    def flushall(self) -> None:
        self.server.command("FLUSHALL")

    @rule(keys=key_sets)
    def debug_sleep_past_the_timeout(self, keys: list[int]) -> None:
        sleeper = threading.Thread(target=self.server.command, args=("DEBUG", "SLEEP", "0.4"))
        sleeper.start()
        time.sleep(0.05)
        self.load(keys)
        self.store(keys)
        sleeper.join()

    @rule()
    def restart(self) -> None:
        self.server.restart()

    @rule()
    def recover(self) -> None:
        """After any fault the tier comes back by itself and stores and loads exactly again."""
        deadline = time.monotonic() + _RECOVER_LIMIT_S
        while not self.tier.healthy:
            self.tier.lookup(key(KEYS))
            assert time.monotonic() < deadline, "the tier never recovered"
            time.sleep(0.005)
        fresh = KEYS + next(self.jobs)
        self.host[0].copy_(_content(fresh))
        job = next(self.jobs)
        assert self.tier.submit_store(TierJob(job, [key(fresh)], [0]))
        assert drain(self.tier, [job])[job].success
        self.host[0].zero_()
        job = next(self.jobs)
        assert self.tier.submit_load(TierJob(job, [key(fresh)], [0]))
        assert drain(self.tier, [job])[job].success
        assert torch.equal(self.host[0], _content(fresh))

    @override
    def teardown(self) -> None:
        self.tier.shutdown()


@pytest.fixture(scope="module")
def machine_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(Path(tmp_path_factory.mktemp("machine")), "--maxmemory-policy", "allkeys-lru")
    yield server
    server.stop()


def test_loads_are_exact_whatever_the_server_does(machine_server: RedisServer) -> None:
    RedisTierMachine.server = machine_server
    run_state_machine_as_test(RedisTierMachine, settings=stateful_settings(steps=40, fast_examples=8))
