"""State machine on a real Mooncake Store: random stores, loads, lookups and removals with faults injected.

The model is what a block must hold: key ``i`` always stores ``pattern(i)`` (keys are
content hashes). Whatever happens to the store (values removed or overwritten behind the
tier's back with garbage, short, flipped, another key's or another identity's values, a
master restart that forgets every value, a stalled master past the timeout), a successful
load gives exactly those bytes, a failed load leaves zeros, a key never stored is never a
hit, and the tier recovers by itself. Restarts and stalls cost seconds each, so an example
makes at most one of each.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test
from typing_extensions import override

from kvcontract import LookupResult, TierJob
from kvcontract.testing import example_identity
from kvcontract.tiers.store_value import encode_value
from tests.profiles import stateful_settings
from tests.tiers.mooncake.conftest import tier_on
from tests.tiers.mooncake.support import MooncakeStore, RawStore
from tests.tiers.redis.support import drain, key, pattern, settle

BYTES = 256
IDENTITY = example_identity(BYTES)
KEYS = 8
HOST_BLOCKS = 4
_RECOVER_LIMIT_S = 30.0
"""Guard against a hang only: the tier probes every 50 ms and the client re-mounts within seconds."""

key_sets = st.lists(st.integers(0, KEYS - 1), min_size=1, max_size=HOST_BLOCKS, unique=True)
damages = st.sampled_from(["garbage", "short", "flipped", "other-key", "fingerprint"])


def _content(i: int) -> torch.Tensor:
    return pattern(i, BYTES)


class MooncakeTierMachine(RuleBasedStateMachine):
    """One tier on the module's store, in a fresh namespace per example; every loaded block is compared."""

    store: ClassVar[MooncakeStore]
    raw: ClassVar[RawStore]
    namespaces: ClassVar[Iterator[int]] = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.host = torch.zeros((HOST_BLOCKS, BYTES), dtype=torch.uint8)
        self.tier = tier_on(self.store, self.host, namespace=f"machine{next(self.namespaces)}", identity=IDENTITY)
        self.jobs = itertools.count(1)
        self.ever_written: set[int] = set()
        self.restarts = 0
        self.stalls = 0

    @rule(keys=key_sets)
    def store_blocks(self, keys: list[int]) -> None:
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

    @rule(i=st.integers(0, KEYS - 1))
    def remove(self, i: int) -> None:
        self.raw.remove(self.tier.store_key(key(i)), True)

    @rule(i=st.integers(0, KEYS - 1), damage=damages)
    def overwrite(self, i: int, damage: str) -> None:
        good = encode_value(key(i), IDENTITY.fingerprint, memoryview(_content(i).numpy().tobytes()))
        values = {
            "garbage": b"garbage",
            "short": good[:-1],
            "flipped": good[:-1] + bytes([good[-1] ^ 0xFF]),
            "other-key": encode_value(key(i + 1), IDENTITY.fingerprint, memoryview(_content(i + 1).numpy().tobytes())),
            "fingerprint": encode_value(
                key(i), example_identity(BYTES, model="other").fingerprint, memoryview(_content(i + 1).numpy().tobytes())
            ),
        }
        if self.raw.upsert(self.tier.store_key(key(i)), values[damage]) == 0:
            self.ever_written.add(i)

    @precondition(lambda self: self.restarts == 0)
    @rule()
    def restart(self) -> None:
        self.restarts += 1
        self.store.restart()

    @precondition(lambda self: self.stalls == 0)
    @rule(keys=key_sets)
    def stall_past_the_timeout(self, keys: list[int]) -> None:
        self.stalls += 1
        self.store.stall()
        try:
            self.load(keys)
            self.store_blocks(keys)
        finally:
            self.store.resume()

    @rule()
    def recover(self) -> None:
        """After any fault the tier comes back by itself and stores and loads exactly again."""
        deadline = time.monotonic() + _RECOVER_LIMIT_S
        fresh = KEYS + next(self.jobs)
        while True:
            while not self.tier.healthy:
                self.tier.lookup(key(KEYS))
                assert time.monotonic() < deadline, "the tier never recovered"
                time.sleep(0.005)
            self.host[0].copy_(_content(fresh))
            job = next(self.jobs)
            if self.tier.submit_store(TierJob(job, [key(fresh)], [0])) and drain(self.tier, [job])[job].success:
                break
            assert time.monotonic() < deadline, "the tier never stored again"
            time.sleep(0.05)
        self.host[0].zero_()
        job = next(self.jobs)
        assert self.tier.submit_load(TierJob(job, [key(fresh)], [0]))
        assert drain(self.tier, [job])[job].success
        assert torch.equal(self.host[0], _content(fresh))

    @override
    def teardown(self) -> None:
        self.tier.shutdown()


@pytest.fixture(scope="module")
def machine_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MooncakeStore]:
    store = MooncakeStore(Path(tmp_path_factory.mktemp("machine")))
    yield store
    store.close()


def test_loads_are_exact_whatever_the_store_does(machine_store: MooncakeStore) -> None:
    MooncakeTierMachine.store = machine_store
    MooncakeTierMachine.raw = machine_store.raw()
    try:
        run_state_machine_as_test(MooncakeTierMachine, settings=stateful_settings(steps=200, fast_examples=3))
    finally:
        MooncakeTierMachine.raw.close()
