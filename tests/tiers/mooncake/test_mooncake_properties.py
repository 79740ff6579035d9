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

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule, run_state_machine_as_test
from typing_extensions import override

from kvcontract.tiers import MooncakeTier
from kvcontract.tiers.mooncake import tier as mooncake_tier
from kvcontract.tiers.remote_tier import RemoteTier, RemoteTierStats
from tests.profiles import stateful_settings
from tests.tiers.mooncake.support import MooncakeStore, RawStore, tier_on
from tests.tiers.support import REMOTE_IDENTITY, REMOTE_KEYS, RemoteTierMachine, key, remote_key_sets


class MooncakeTierMachine(RemoteTierMachine):
    """One tier on the module's store; values removed behind its back, the master restarted or stalled."""

    store: ClassVar[MooncakeStore]
    raw: ClassVar[RawStore]
    stores_fail_while_healthy = True

    def __init__(self) -> None:
        super().__init__()
        self.restarts = 0
        self.stalls = 0

    @override
    def make_tier(self, host: torch.Tensor, namespace: str) -> RemoteTier[RemoteTierStats]:
        return tier_on(self.store, host, namespace=namespace, identity=REMOTE_IDENTITY)

    @override
    def write_value(self, i: int, value: bytes) -> bool:
        return self.raw.upsert(self._name(i), value) == 0

    def _name(self, i: int) -> str:
        tier = self.tier
        assert isinstance(tier, MooncakeTier)
        return tier.store_key(key(i))

    @rule(i=st.integers(0, REMOTE_KEYS - 1))
    def remove(self, i: int) -> None:
        self.raw.remove(self._name(i), True)

    @precondition(lambda self: self.restarts == 0)
    @rule()
    def restart(self) -> None:
        self.restarts += 1
        self.store.restart()

    @precondition(lambda self: self.stalls == 0)
    @rule(keys=remote_key_sets)
    def stall_past_the_timeout(self, keys: list[int]) -> None:
        self.stalls += 1
        self.store.stall()
        try:
            self.load(keys)
            self.store_blocks(keys)
        finally:
            self.store.resume()


@pytest.fixture(scope="module")
def machine_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MooncakeStore]:
    store = MooncakeStore(Path(tmp_path_factory.mktemp("machine")))
    yield store
    store.close()


@pytest.mark.parametrize("zero_copy_from", [mooncake_tier.ZERO_COPY_FROM, 0], ids=["copied", "zero-copy"])
def test_loads_are_exact_whatever_the_store_does(
    machine_store: MooncakeStore, monkeypatch: pytest.MonkeyPatch, zero_copy_from: int
) -> None:
    monkeypatch.setattr(mooncake_tier, "ZERO_COPY_FROM", zero_copy_from)
    MooncakeTierMachine.store = machine_store
    MooncakeTierMachine.raw = machine_store.raw()
    try:
        run_state_machine_as_test(MooncakeTierMachine, settings=stateful_settings(steps=200, fast_examples=3))
    finally:
        MooncakeTierMachine.raw.close()
