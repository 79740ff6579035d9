"""The CPU manager and the reuse filter under random operation sequences, against a reference model.

After every step: capacity is never exceeded, reference counts are never negative and
match the loads in progress, pinned and in-flight blocks are never evicted, every block
stored and not evicted is still found, and the events replay to the readable set.
Misuse rules make calls that must raise ``ValueError`` and change nothing: the manager's
whole state (counters, each key's block and reference count) and the model stay as they were.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from typing_extensions import override

from kvcontract import CachePolicy, LookupResult, OffloadingManager, OffloadKey, PrepareStoreOutput, ReqContext
from kvcontract.managers import CPUOffloadingManager, FilterReusedOffloadingManager
from kvcontract.policies import get_policy
from tests.managers.support import Delegating, snapshot
from tests.policies.support import key, keys
from tests.profiles import stateful_settings

CAPACITY = 5
NUMBERS = st.integers(0, 11)
BATCHES = st.lists(NUMBERS, min_size=1, max_size=5)
ALL_KEYS = keys(*range(12))
SETTINGS = stateful_settings(steps=40, fast_examples=50)


@dataclass
class Model:
    """What the CPU manager must hold: keys in flight, and readable keys with their pins."""

    in_flight: set[OffloadKey] = field(default_factory=set[OffloadKey])
    pins: dict[OffloadKey, int] = field(default_factory=dict[OffloadKey, int])

    def held(self) -> int:
        return len(self.in_flight) + len(self.pins)


class ManagerMachine(RuleBasedStateMachine):
    """Drives a CPU manager with one policy, as a scheduler with concurrent requests would."""

    policy_name = "lru"

    def build_policy(self) -> str | CachePolicy:
        """The policy the manager is built with: by default the built-in one named ``policy_name``."""
        return self.policy_name

    def __init__(self) -> None:
        super().__init__()
        self.cpu = CPUOffloadingManager(CAPACITY, self.build_policy(), enable_events=True)
        self.manager: OffloadingManager = self.cpu
        self.model = Model()
        self.stores: list[tuple[ReqContext, list[OffloadKey]]] = []
        self.loads: list[tuple[ReqContext, list[OffloadKey]]] = []
        self.readable: set[OffloadKey] = set()
        self.requests = 0

    def context(self) -> ReqContext:
        self.requests += 1
        return ReqContext(f"request-{self.requests}")

    @rule(number=NUMBERS)
    def lookup(self, number: int) -> None:
        found = self.manager.lookup(key(number), self.context())
        if key(number) in self.model.in_flight:
            assert found is LookupResult.HIT_PENDING
        elif key(number) in self.model.pins:
            assert found is LookupResult.HIT
        else:
            assert found is LookupResult.MISS

    @rule(numbers=BATCHES)
    def prepare_store(self, numbers: list[int]) -> None:
        batch = keys(*numbers)
        context = self.context()
        output = self.manager.prepare_store(batch, context)
        model = self.model
        new = [k for k in dict.fromkeys(batch) if k not in model.pins and k not in model.in_flight]
        if output is None:
            assert len(new) > CAPACITY - model.held() + len(self.evictable(batch))
            return
        assert list(output.keys_to_store) == new
        self.apply_store(batch, context, output)

    def evictable(self, batch: list[OffloadKey]) -> set[OffloadKey]:
        return {k for k, pins in self.model.pins.items() if pins == 0 and k not in batch}

    def apply_store(self, batch: list[OffloadKey], context: ReqContext, output: PrepareStoreOutput) -> None:
        model = self.model
        to_store = list(output.keys_to_store)
        evicted = list(output.evicted_keys)
        assert len(evicted) == max(0, len(to_store) - (CAPACITY - model.held()))
        assert set(evicted) <= self.evictable(batch)
        for victim in evicted:
            del model.pins[victim]
        model.in_flight.update(to_store)
        self.stores.append((context, to_store))

    @precondition(lambda self: bool(self.stores))
    @rule(data=st.data(), success=st.booleans())
    def complete_store(self, data: st.DataObject, success: bool) -> None:
        context, batch = self.stores.pop(data.draw(st.integers(0, len(self.stores) - 1)))
        self.manager.complete_store(batch, context, success=success)
        for k in batch:
            self.model.in_flight.discard(k)
            if success:
                self.model.pins[k] = 0

    @rule(data=st.data())
    def prepare_load(self, data: st.DataObject) -> None:
        readable = sorted(self.model.pins)
        if not readable:
            return
        batch = data.draw(st.lists(st.sampled_from(readable), min_size=1, max_size=3, unique=True))
        context = self.context()
        self.manager.prepare_load(batch, context)
        for k in batch:
            self.model.pins[k] += 1
        self.loads.append((context, batch))

    @precondition(lambda self: bool(self.loads))
    @rule(data=st.data())
    def complete_load(self, data: st.DataObject) -> None:
        context, batch = self.loads.pop(data.draw(st.integers(0, len(self.loads) - 1)))
        self.manager.complete_load(batch, context)
        for k in batch:
            self.model.pins[k] -= 1

    @rule(numbers=st.lists(NUMBERS, max_size=6))
    def touch(self, numbers: list[int]) -> None:
        self.manager.touch(keys(*numbers), self.context())

    @rule()
    def take_events(self) -> None:
        for event in self.manager.take_events():
            assert event.medium == "CPU"
            if event.removed:
                assert set(event.keys) <= self.readable
                self.readable.difference_update(event.keys)
            else:
                self.readable.update(event.keys)
        assert self.readable == set(self.model.pins)

    def refused(self, call: Callable[[], object], message: str) -> None:
        """``call`` raises ``ValueError`` matching ``message`` and changes nothing the model or the manager hold."""
        before = snapshot(self.cpu, ALL_KEYS)
        model = (set(self.model.in_flight), dict(self.model.pins))
        with pytest.raises(ValueError, match=message):
            call()
        assert snapshot(self.cpu, ALL_KEYS) == before
        assert (self.model.in_flight, self.model.pins) == model

    @rule(data=st.data())
    def complete_load_of_a_block_not_loaded(self, data: st.DataObject) -> None:
        pins = self.model.pins
        pinned = sorted(k for k, count in pins.items() if count)
        good: list[OffloadKey] = []
        if pinned:
            good = data.draw(st.lists(st.sampled_from(pinned), max_size=2, unique=True))
        pin_once_too_often: bool = bool(pinned) and data.draw(st.booleans())
        if pin_once_too_often:
            over = data.draw(st.sampled_from(pinned))
            bad = [over] * (pins[over] + 1)
            good = [k for k in good if k != over]
        else:
            bad = [data.draw(st.sampled_from([k for k in ALL_KEYS if not pins.get(k)]))]
        batch = data.draw(st.permutations([*good, *bad]))
        self.refused(
            lambda: self.manager.complete_load(batch, self.context()), "complete_load: block .* is not being loaded"
        )

    @rule(data=st.data())
    def prepare_load_of_a_block_not_readable(self, data: st.DataObject) -> None:
        bad = data.draw(st.sampled_from([k for k in ALL_KEYS if k not in self.model.pins]))
        readable = sorted(self.model.pins)
        good = data.draw(st.lists(st.sampled_from(readable), max_size=2, unique=True)) if readable else []
        batch = data.draw(st.permutations([*good, bad]))
        self.refused(lambda: self.manager.prepare_load(batch, self.context()), "prepare_load: block")

    @precondition(lambda self: any(batch for _, batch in self.stores))
    @rule(data=st.data(), success=st.booleans(), how=st.sampled_from(["duplicate", "unprepared", "other"]))
    def complete_store_misused(self, data: st.DataObject, success: bool, how: str) -> None:
        context, batch = data.draw(st.sampled_from([store for store in self.stores if store[1]]))
        if how == "duplicate":
            named = data.draw(st.permutations([*batch, data.draw(st.sampled_from(batch))]))
            message = "is named twice"
        elif how == "unprepared":
            absent = [k for k in ALL_KEYS if k not in self.model.pins and k not in self.model.in_flight]
            if not absent:
                return
            named = data.draw(st.permutations([*batch, data.draw(st.sampled_from(absent))]))
            message = "was never prepared"
        else:
            named, context = batch, self.context()
            message = "belongs to 'request-"
        self.refused(
            lambda: self.manager.complete_store(named, context, success=success), f"complete_store: .*{message}"
        )

    @rule()
    def reset_cache(self) -> None:
        self.manager.reset_cache()
        self.model.pins = {k: pins for k, pins in self.model.pins.items() if pins}

    @invariant()
    def agrees_with_the_model(self) -> None:
        stats = self.manager.stats()
        assert stats.used == self.model.held() <= CAPACITY
        assert stats.storing == len(self.model.in_flight)
        assert stats.reading == sum(1 for count in self.model.pins.values() if count)
        policy = self.cpu.policy
        for k in ALL_KEYS:
            block = policy.get(k)
            if k in self.model.in_flight:
                assert block is not None and block.ref_cnt == -1
            elif k in self.model.pins:
                assert block is not None and block.ref_cnt == self.model.pins[k] >= 0
            else:
                assert block is None
        if not self.loads:
            assert all(block.ref_cnt <= 0 for block in map(policy.get, ALL_KEYS) if block)


class FilteredMachine(ManagerMachine):
    """The same scheduler in front of a reuse filter: only keys offered twice reach the manager."""

    def __init__(self) -> None:
        super().__init__()
        self.manager = FilterReusedOffloadingManager(self.cpu, max_tracker_size=4)
        self.offers: Counter[OffloadKey] = Counter()

    @override
    @rule(numbers=BATCHES)
    def prepare_store(self, numbers: list[int]) -> None:
        batch = keys(*numbers)
        context = self.context()
        self.offers.update(set(batch))
        output = self.manager.prepare_store(batch, context)
        if output is None:
            return
        to_store = list(output.keys_to_store)
        assert all(self.offers[k] >= 2 for k in to_store)
        assert not any(k in self.model.pins or k in self.model.in_flight for k in to_store)
        self.apply_store(batch, context, output)


@SETTINGS
class LRUManagerMachine(ManagerMachine):
    policy_name = "lru"


@SETTINGS
class ARCManagerMachine(ManagerMachine):
    policy_name = "arc"


@SETTINGS
class S3FIFOManagerMachine(ManagerMachine):
    policy_name = "s3fifo"


@SETTINGS
class SIEVEManagerMachine(ManagerMachine):
    policy_name = "sieve"


@SETTINGS
class PrefixReuseManagerMachine(ManagerMachine):
    policy_name = "prefix_reuse"


@SETTINGS
class OwnTableARCManagerMachine(ManagerMachine):
    """ARC behind a plain ``CachePolicy``, so the manager keeps its own block table beside the policy's."""

    policy_name = "arc"

    @override
    def build_policy(self) -> str | CachePolicy:
        return Delegating(get_policy(self.policy_name)(CAPACITY))


@SETTINGS
class FilteredPrefixReuseMachine(FilteredMachine):
    policy_name = "prefix_reuse"


TestLRUManager = LRUManagerMachine.TestCase
TestARCManager = ARCManagerMachine.TestCase
TestS3FIFOManager = S3FIFOManagerMachine.TestCase
TestSIEVEManager = SIEVEManagerMachine.TestCase
TestPrefixReuseManager = PrefixReuseManagerMachine.TestCase
TestOwnTableARCManager = OwnTableARCManagerMachine.TestCase
TestFilteredManager = FilteredPrefixReuseMachine.TestCase
