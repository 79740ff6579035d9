"""The reuse filter: store a block only from the ``store_threshold``-th request that offers it."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
import torch
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from typing_extensions import override

from kvcontract import LookupResult, OffloadingManager, OffloadKey, PrepareStoreOutput, ReqContext
from kvcontract.managers import (
    CPUOffloadingManager,
    EvictionListener,
    FilterReusedOffloadingManager,
    ForwardingManager,
    TieringOffloadingManager,
)
from tests.managers.support import ControlledTier
from tests.policies.support import key, keys
from tests.profiles import stateful_settings


def offer(manager: OffloadingManager, request: str | ReqContext, *numbers: int) -> list[int]:
    """Offer ``numbers`` for storing as ``request``; returns the numbers stored."""
    context = ReqContext(request) if isinstance(request, str) else request
    output = manager.prepare_store(keys(*numbers), context)
    assert output is not None
    manager.complete_store(output.keys_to_store, context)
    return [int.from_bytes(stored[:8], "big") for stored in output.keys_to_store]


def test_a_block_is_stored_from_its_second_request_on() -> None:
    manager = FilterReusedOffloadingManager(CPUOffloadingManager(8))
    assert offer(manager, "a", 1, 2) == []
    assert manager.lookup(key(1), ReqContext("b")) is LookupResult.MISS
    assert offer(manager, "b", 1, 3) == [1]
    assert manager.lookup(key(1), ReqContext("c")) is LookupResult.HIT
    assert manager.seen(key(1)) == 2 and manager.seen(key(2)) == 1
    assert manager.stats().skipped_stores == 3  # 1 and 2 at their first offer, 3 at its first


def test_a_request_counts_a_key_once_however_often_it_offers_it() -> None:
    manager = FilterReusedOffloadingManager(CPUOffloadingManager(8), store_threshold=2)
    request = ReqContext("a")
    assert offer(manager, request, 1) == []
    assert offer(manager, request, 1) == []
    assert manager.seen(key(1)) == 1
    assert offer(manager, "b", 1) == [1]


def test_a_higher_threshold_waits_longer() -> None:
    manager = FilterReusedOffloadingManager(CPUOffloadingManager(8), store_threshold=3)
    assert offer(manager, "a", 1) == []
    assert offer(manager, "b", 1) == []
    assert offer(manager, "c", 1) == [1]


def test_the_tracker_forgets_its_least_recently_offered_keys() -> None:
    manager = FilterReusedOffloadingManager(CPUOffloadingManager(8), max_tracker_size=2)
    offer(manager, "a", 1)
    offer(manager, "b", 2, 3)
    assert manager.seen(key(1)) == 0
    assert offer(manager, "c", 1, 3) == [3]


def test_a_stored_key_stays_in_the_batch_so_it_is_never_evicted_for_it() -> None:
    inner = CPUOffloadingManager(2)
    manager = FilterReusedOffloadingManager(inner, max_tracker_size=1)
    offer(manager, "a", 1)
    assert offer(manager, "b", 1) == [1]
    offer(manager, "c", 2)
    assert offer(manager, "d", 2) == [2]
    offer(manager, "e", 3)
    context = ReqContext("f")
    output = manager.prepare_store(keys(1, 3), context)
    assert output is not None and list(output.keys_to_store) == keys(3)
    assert list(output.evicted_keys) == keys(2)


def test_a_failed_store_is_admitted_again_only_after_new_requests() -> None:
    manager = FilterReusedOffloadingManager(CPUOffloadingManager(4))
    offer(manager, "a", 1)
    context = ReqContext("b")
    output = manager.prepare_store(keys(1), context)
    assert output is not None and list(output.keys_to_store) == keys(1)
    manager.complete_store(keys(1), context, success=False)
    assert manager.lookup(key(1), context) is LookupResult.MISS
    assert offer(manager, "c", 1) == [1]


def test_everything_else_goes_to_the_inner_manager() -> None:
    inner = CPUOffloadingManager(4, enable_events=True)
    manager = FilterReusedOffloadingManager(inner)
    offer(manager, "a", 1)
    offer(manager, "b", 1)
    context = ReqContext("c")
    manager.touch(keys(1), context)
    manager.prepare_load(keys(1), context)
    manager.complete_load(keys(1), context)
    manager.on_request_finished(context)
    assert manager.stats() == replace(inner.stats(), skipped_stores=1) and manager.stats().loaded == 1
    assert len(manager.take_events()) == 1
    manager.reset_cache()
    assert inner.stats().used == 0
    assert manager.inner is inner
    manager.shutdown()


@pytest.mark.parametrize(
    "options",
    [
        {"store_threshold": 1},
        {"store_threshold": 0},
        {"store_threshold": True},
        {"store_threshold": 2.0},
        {"max_tracker_size": 0},
        {"max_tracker_size": "10"},
    ],
)
def test_invalid_arguments_raise_value_error(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        FilterReusedOffloadingManager(CPUOffloadingManager(4), **options)


def test_an_inner_object_that_is_not_a_manager_is_rejected() -> None:
    not_a_manager: Any = object()
    with pytest.raises(ValueError, match="inner must be an OffloadingManager"):
        FilterReusedOffloadingManager(not_a_manager)


class StoresForItself(ForwardingManager):
    """A manager that also stores on its own, as a tiering manager's promotions do, and reports what that evicts.

    ``fail_next`` makes its next ``prepare_store`` raise, as a broken inner manager would.
    """

    def __init__(self, inner: OffloadingManager) -> None:
        super().__init__(inner)
        self.listeners: list[EvictionListener] = []
        self.fail_next = False
        self.own = ReqContext("stores-for-itself")

    @override
    def add_eviction_listener(self, listener: EvictionListener) -> None:
        self.listeners.append(listener)

    def store_for_itself(self, batch: Sequence[OffloadKey]) -> PrepareStoreOutput | None:
        """Store ``batch`` for this manager's own use, telling the listeners what it evicted."""
        plan = self.inner.prepare_store(batch, self.own)
        if plan is not None:
            for listener in self.listeners:
                listener(plan.evicted_keys)
            self.inner.complete_store(plan.keys_to_store, self.own)
        return plan

    @override
    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("injected failure of the inner manager")
        return super().prepare_store(keys, req_context)


def filter_over_tiering(capacity: int) -> tuple[FilterReusedOffloadingManager, ControlledTier]:
    """A reuse filter over a tiering manager with a CPU primary of ``capacity`` blocks and one tier."""
    tier = ControlledTier(torch.zeros((capacity, 8), dtype=torch.uint8))
    tiering = TieringOffloadingManager(CPUOffloadingManager(capacity), [tier])
    return FilterReusedOffloadingManager(tiering), tier


def test_keys_a_tier_promotion_evicts_leave_the_admitted_set() -> None:
    manager, tier = filter_over_tiering(2)
    offer(manager, "a", 1, 2)
    assert offer(manager, "b", 1, 2) == [1, 2]
    tier.finish()
    offer(manager, "c", 3, 4)
    assert offer(manager, "d", 3, 4) == [3, 4]
    tier.finish()
    assert set(manager.admitted) == set(keys(3, 4))
    assert manager.lookup(key(1), ReqContext("e")) is LookupResult.RETRY
    assert set(manager.admitted) == set(keys(4))


def test_reset_cache_keeps_only_the_stores_in_flight_admitted() -> None:
    manager = FilterReusedOffloadingManager(CPUOffloadingManager(8))
    offer(manager, "a", 1, 2, 3)
    assert offer(manager, "b", 1, 2) == [1, 2]
    context = ReqContext("c")
    output = manager.prepare_store(keys(3), context)
    assert output is not None and list(output.keys_to_store) == keys(3)
    manager.reset_cache()
    assert set(manager.admitted) == set(keys(3))
    manager.complete_store(keys(3), context)
    assert manager.lookup(key(3), context) is LookupResult.HIT


def test_a_prepare_store_that_raises_counts_no_offer() -> None:
    inner = StoresForItself(CPUOffloadingManager(4))
    manager = FilterReusedOffloadingManager(inner)
    context = ReqContext("a")
    inner.fail_next = True
    with pytest.raises(RuntimeError, match="injected"):
        manager.prepare_store(keys(1, 2), context)
    assert manager.seen(key(1)) == 0 and manager.seen(key(2)) == 0
    assert offer(manager, context, 1) == []
    assert manager.seen(key(1)) == 1


def test_a_finished_request_forgets_the_keys_it_offered() -> None:
    manager = FilterReusedOffloadingManager(CPUOffloadingManager(4))
    context = ReqContext("a")
    offer(manager, context, 1)
    manager.on_request_finished(context)
    assert offer(manager, context, 1) == [1]


CAPACITY = 3
TRACKER = 5
NUMBERS = st.integers(0, 6)
BATCHES = st.lists(NUMBERS, min_size=1, max_size=4)
ALL_KEYS = keys(*range(7))
MISUSES = (
    "inner refuses prepare_store",
    "complete_store never prepared",
    "complete_load not loading",
    "prepare_load not readable",
)


@dataclass
class FilterModel:
    """What the filter must remember, and what its inner manager holds."""

    seen: OrderedDict[OffloadKey, int] = field(default_factory=OrderedDict[OffloadKey, int])
    counted: dict[int, set[OffloadKey]] = field(default_factory=dict[int, set[OffloadKey]])
    admitted: set[OffloadKey] = field(default_factory=set[OffloadKey])
    in_flight: set[OffloadKey] = field(default_factory=set[OffloadKey])
    pins: dict[OffloadKey, int] = field(default_factory=dict[OffloadKey, int])


class ReuseFilterMachine(RuleBasedStateMachine):
    """The filter over a manager that also evicts on its own, with misuse that must change nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.cpu = CPUOffloadingManager(CAPACITY)
        self.inner = StoresForItself(self.cpu)
        self.filter = FilterReusedOffloadingManager(self.inner, max_tracker_size=TRACKER)
        self.model = FilterModel()
        self.requests = [ReqContext(str(slot)) for slot in range(3)]
        self.opened = len(self.requests)
        self.stores: list[tuple[ReqContext, list[OffloadKey]]] = []
        self.loads: list[tuple[ReqContext, list[OffloadKey]]] = []

    def held(self) -> set[OffloadKey]:
        return {k for k in ALL_KEYS if self.cpu.policy.get(k) is not None}

    @rule(slot=st.integers(0, 2), numbers=BATCHES, complete_now=st.booleans())
    def prepare_store(self, slot: int, numbers: list[int], complete_now: bool) -> None:
        batch, context, model = keys(*numbers), self.requests[slot], self.model
        counted = model.counted.setdefault(slot, set())
        fresh = [k for k in dict.fromkeys(batch) if k not in model.admitted and k not in counted]
        forwarded = {k for k in batch if k in model.admitted or model.seen.get(k, 0) + (k in fresh) >= 2}
        held = self.held()
        output = self.filter.prepare_store(batch, context)
        counted.update(fresh)
        for k in fresh:
            model.seen[k] = model.seen.get(k, 0) + 1
            model.seen.move_to_end(k)
        while len(model.seen) > TRACKER:
            model.seen.popitem(last=False)
        if output is None:
            return
        to_store, evicted = list(output.keys_to_store), list(output.evicted_keys)
        assert set(to_store) == forwarded - held
        assert set(evicted) <= held - forwarded
        model.admitted = (model.admitted | set(to_store)) - set(evicted)
        model.in_flight.update(to_store)
        self.stores.append((context, to_store))
        if complete_now:
            self.finish_store(len(self.stores) - 1, success=True)

    @precondition(lambda self: bool(self.stores))
    @rule(data=st.data(), success=st.booleans())
    def complete_store(self, data: st.DataObject, success: bool) -> None:
        self.finish_store(data.draw(st.integers(0, len(self.stores) - 1)), success=success)

    def finish_store(self, index: int, *, success: bool) -> None:
        context, batch = self.stores.pop(index)
        self.filter.complete_store(iter(batch), context, success)
        self.model.in_flight.difference_update(batch)
        if not success:
            self.model.admitted.difference_update(batch)

    @rule(numbers=st.lists(NUMBERS, min_size=2, max_size=CAPACITY, unique=True))
    def inner_stores_for_itself(self, numbers: list[int]) -> None:
        plan = self.inner.store_for_itself(keys(*numbers))
        if plan is not None:
            self.model.admitted.difference_update(plan.evicted_keys)

    @rule(data=st.data())
    def load(self, data: st.DataObject) -> None:
        readable = sorted(self.held() - self.model.in_flight - {k for _, b in self.stores for k in b})
        if not readable:
            return
        batch = data.draw(st.lists(st.sampled_from(readable), min_size=1, max_size=2, unique=True))
        context = ReqContext("load")
        self.filter.prepare_load(batch, context)
        self.loads.append((context, batch))

    @precondition(lambda self: bool(self.loads))
    @rule(data=st.data())
    def complete_load(self, data: st.DataObject) -> None:
        context, batch = self.loads.pop(data.draw(st.integers(0, len(self.loads) - 1)))
        self.filter.complete_load(batch, context)

    @rule(slot=st.integers(0, 2))
    def finish_request(self, slot: int) -> None:
        self.filter.on_request_finished(self.requests[slot])
        self.model.counted.pop(slot, None)
        self.opened += 1
        self.requests[slot] = ReqContext(str(self.opened))

    @rule()
    def reset_cache(self) -> None:
        self.filter.reset_cache()
        self.model.admitted &= self.model.in_flight

    def snapshot(self) -> tuple[object, ...]:
        """Everything the filter and its inner manager show, to compare across a refused call."""
        blocks = tuple((b.block_id, b.ref_cnt) if b else None for b in map(self.cpu.policy.get, ALL_KEYS))
        seen = tuple(self.filter.seen(k) for k in ALL_KEYS)
        return seen, frozenset(self.filter.admitted), self.cpu.stats(), blocks

    @rule(kind=st.sampled_from(MISUSES), slot=st.integers(0, 2), number=NUMBERS, success=st.booleans())
    def misuse(self, kind: str, slot: int, number: int, success: bool) -> None:
        """A call that must raise and leave the filter and its inner manager exactly as they were."""
        storing = {k for _, batch in self.stores for k in batch}
        loading = {k for _, batch in self.loads for k in batch}
        bad, before, stranger = key(number), self.snapshot(), ReqContext("stranger")
        if kind == "inner refuses prepare_store":
            self.inner.fail_next = True
            with pytest.raises(RuntimeError, match="injected"):
                self.filter.prepare_store(keys(number, (number + 1) % 7), self.requests[slot])
        elif kind == "complete_store never prepared":
            if bad in self.held() or bad in storing:
                return
            with pytest.raises(ValueError, match="complete_store"):
                self.filter.complete_store([bad], stranger, success)
        elif kind == "complete_load not loading":
            if bad in loading:
                return
            with pytest.raises(ValueError, match="complete_load"):
                self.filter.complete_load([bad], stranger)
        else:
            if bad in self.held() - storing:
                return
            with pytest.raises(ValueError, match="prepare_load"):
                self.filter.prepare_load([bad], stranger)
        assert self.snapshot() == before

    @invariant()
    def agrees_with_the_model_and_admits_only_what_inner_holds(self) -> None:
        assert [self.filter.seen(k) for k in ALL_KEYS] == [self.model.seen.get(k, 0) for k in ALL_KEYS]
        assert set(self.filter.admitted) == self.model.admitted
        assert self.model.admitted <= self.held()
        assert len(self.filter.admitted) <= CAPACITY


ReuseFilterMachine.TestCase.settings = stateful_settings(steps=40, fast_examples=60)
TestReuseFilterMachine = ReuseFilterMachine.TestCase
