"""The host-memory manager: each promise of the scheduler-side contract, one test each."""

from __future__ import annotations

from collections.abc import Sequence, Set

import pytest
from typing_extensions import override

from kvcontract import (
    BlockIdsSpec,
    BlockStatus,
    CachePolicy,
    LookupResult,
    ManagerStats,
    OffloadingEvent,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
)
from kvcontract.managers import CPUOffloadingManager, FilterReusedOffloadingManager
from kvcontract.policies import LRUPolicy
from tests.managers.support import snapshot
from tests.policies.support import POLICY_NAMES, key, keys

REQUEST = ReqContext("request")


def stored(manager: CPUOffloadingManager, *numbers: int) -> PrepareStoreOutput:
    """Store ``numbers`` as one request would: prepare, touch, complete."""
    output = manager.prepare_store(keys(*numbers), REQUEST)
    assert output is not None
    manager.touch(keys(*numbers), REQUEST)
    manager.complete_store(output.keys_to_store, REQUEST)
    return output


def block_ids(output: PrepareStoreOutput) -> list[int]:
    spec = output.store_spec
    assert isinstance(spec, BlockIdsSpec)
    return list(spec.block_ids)


def test_a_store_in_flight_looks_up_as_hit_pending() -> None:
    manager = CPUOffloadingManager(4)
    assert manager.lookup(key(1), REQUEST) is LookupResult.MISS
    output = manager.prepare_store(keys(1), REQUEST)
    assert output is not None
    assert manager.lookup(key(1), REQUEST) is LookupResult.HIT_PENDING
    manager.complete_store(keys(1), REQUEST)
    assert manager.lookup(key(1), REQUEST) is LookupResult.HIT


def test_no_event_before_complete_store() -> None:
    manager = CPUOffloadingManager(4, enable_events=True)
    output = manager.prepare_store(keys(1, 2), REQUEST)
    assert output is not None
    assert manager.take_events() == []
    manager.complete_store(output.keys_to_store, REQUEST)
    assert manager.take_events() == [OffloadingEvent(keys(1, 2), "CPU", removed=False)]
    assert manager.take_events() == []


def test_prepare_store_skips_keys_already_stored() -> None:
    manager = CPUOffloadingManager(4)
    stored(manager, 1, 2)
    output = manager.prepare_store(keys(1, 2, 3), REQUEST)
    assert output is not None
    assert list(output.keys_to_store) == keys(3) and len(block_ids(output)) == 1


def test_prepare_store_evicts_only_what_it_needs() -> None:
    manager = CPUOffloadingManager(4)
    stored(manager, 1, 2, 3)
    output = manager.prepare_store(keys(4, 5), REQUEST)
    assert output is not None
    assert len(output.evicted_keys) == 1
    assert manager.stats().used == 4


def test_prepare_store_never_evicts_a_key_of_its_own_batch() -> None:
    manager = CPUOffloadingManager(3)
    stored(manager, 1, 2, 3)
    manager.touch(keys(2, 3), REQUEST)
    output = manager.prepare_store(keys(1, 4), REQUEST)
    assert output is not None
    assert key(1) not in output.evicted_keys and list(output.evicted_keys) == keys(3)
    assert manager.lookup(key(1), REQUEST) is LookupResult.HIT


def test_prepare_store_returns_none_when_too_few_blocks_are_evictable() -> None:
    manager = CPUOffloadingManager(3, enable_events=True)
    stored(manager, 1, 2)
    manager.take_events()
    manager.prepare_load(keys(1), REQUEST)
    in_flight = manager.prepare_store(keys(3), REQUEST)
    assert in_flight is not None
    assert manager.prepare_store(keys(4, 5), REQUEST) is None
    assert manager.take_events() == []
    assert manager.stats().used == 3 and manager.stats().failed_stores == 2
    for number, expected in ((1, LookupResult.HIT), (2, LookupResult.HIT), (3, LookupResult.HIT_PENDING)):
        assert manager.lookup(key(number), REQUEST) is expected


def test_the_eviction_event_comes_before_the_store_event() -> None:
    manager = CPUOffloadingManager(2, enable_events=True)
    stored(manager, 1, 2)
    manager.take_events()
    stored(manager, 3)
    events = manager.take_events()
    assert [event.removed for event in events] == [True, False]
    assert list(events[0].keys) == keys(2) and list(events[1].keys) == keys(3)


def test_blocks_being_loaded_cannot_be_evicted_until_complete_load() -> None:
    manager = CPUOffloadingManager(2)
    stored(manager, 1, 2)
    manager.prepare_load(keys(1, 2), REQUEST)
    assert manager.prepare_store(keys(3), REQUEST) is None
    manager.complete_load(keys(1), REQUEST)
    output = manager.prepare_store(keys(3), REQUEST)
    assert output is not None and list(output.evicted_keys) == keys(1)
    assert manager.lookup(key(2), REQUEST) is LookupResult.HIT


def test_a_failed_store_frees_only_blocks_not_yet_readable() -> None:
    manager = CPUOffloadingManager(4, enable_events=True)
    stored(manager, 1)
    manager.take_events()
    output = manager.prepare_store(keys(1, 2, 3), REQUEST)
    assert output is not None
    manager.complete_store(keys(1, 2, 3), REQUEST, success=False)
    assert manager.lookup(key(1), REQUEST) is LookupResult.HIT
    assert manager.lookup(key(2), REQUEST) is LookupResult.MISS
    assert manager.stats().used == 1 and manager.stats().failed_stores == 2
    assert manager.take_events() == []
    again = manager.prepare_store(keys(2, 3, 4), REQUEST)
    assert again is not None and again.evicted_keys == []


def test_prepare_load_returns_block_ids_in_key_order() -> None:
    manager = CPUOffloadingManager(4)
    ids = dict(zip(keys(1, 2, 3), block_ids(stored(manager, 1, 2, 3))))
    spec = manager.prepare_load(keys(3, 1, 2), REQUEST)
    assert isinstance(spec, BlockIdsSpec)
    assert list(spec.block_ids) == [ids[key(3)], ids[key(1)], ids[key(2)]]


def test_touch_reorders_recency() -> None:
    manager = CPUOffloadingManager(3)
    stored(manager, 1)
    stored(manager, 2)
    stored(manager, 3)
    manager.touch(keys(1), REQUEST)
    output = manager.prepare_store(keys(4), REQUEST)
    assert output is not None and list(output.evicted_keys) == keys(2)


def test_stats_are_typed_and_count() -> None:
    manager = CPUOffloadingManager(2)
    stored(manager, 1, 2)
    manager.lookup(key(1), REQUEST)
    manager.lookup(key(9), REQUEST)
    manager.prepare_load(keys(1), REQUEST)
    manager.complete_load(keys(1), REQUEST)
    stored(manager, 3)
    stats = manager.stats()
    assert isinstance(stats, ManagerStats)
    assert stats == ManagerStats(capacity=2, used=2, hits=1, misses=1, stored=3, loaded=1, evicted=1)
    assert stats.hit_ratio == 0.5


def test_blocks_in_flight_are_gauged_once_each() -> None:
    manager = CPUOffloadingManager(4)
    stored(manager, 1, 2)
    first, second = ReqContext("first"), ReqContext("second")
    assert manager.prepare_store(keys(3), first) is not None
    manager.prepare_load(keys(1, 2), first)
    manager.prepare_load(keys(1, 1), second)  # a block two loads read, and one load names twice
    assert (manager.stats().storing, manager.stats().reading) == (1, 2)
    manager.complete_load(keys(1, 1), second)
    assert manager.stats().reading == 2
    manager.complete_load(keys(1, 2), first)
    manager.complete_store(keys(3), first, success=False)
    assert (manager.stats().storing, manager.stats().reading) == (0, 0)


def test_reset_cache_drops_readable_blocks_but_keeps_loads_and_stores_in_flight() -> None:
    manager = CPUOffloadingManager(4, enable_events=True)
    stored(manager, 1, 2)
    manager.prepare_load(keys(1), REQUEST)
    manager.prepare_store(keys(3), REQUEST)
    manager.take_events()
    manager.reset_cache()
    assert manager.take_events() == [OffloadingEvent(keys(2), "CPU", removed=True)]
    assert [manager.lookup(k, REQUEST) for k in keys(1, 2, 3)] == [
        LookupResult.HIT,
        LookupResult.MISS,
        LookupResult.HIT_PENDING,
    ]
    manager.complete_load(keys(1), REQUEST)
    manager.reset_cache()
    assert manager.stats().used == 1


def test_events_are_off_unless_enabled() -> None:
    manager = CPUOffloadingManager(2)
    stored(manager, 1)
    assert manager.take_events() == []


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_every_policy_by_name(name: str) -> None:
    manager = CPUOffloadingManager(2, name)
    stored(manager, 1, 2)
    stored(manager, 3)
    assert manager.stats().used == 2 and manager.stats().evicted == 1


def test_a_policy_instance_is_used_as_given() -> None:
    policy = LRUPolicy(8)
    manager = CPUOffloadingManager(2, policy)
    stored(manager, 1)
    assert manager.policy is policy and len(policy) == 1
    with pytest.raises(ValueError, match="must be empty"):
        CPUOffloadingManager(2, policy)


def test_bad_arguments_and_calls_are_rejected_clearly() -> None:
    with pytest.raises(ValueError, match="capacity"):
        CPUOffloadingManager(0)
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        CPUOffloadingManager(2, "nope")
    manager = CPUOffloadingManager(2)
    with pytest.raises(ValueError, match="not offloaded"):
        manager.prepare_load(keys(1), REQUEST)
    manager.prepare_store(keys(1), REQUEST)
    with pytest.raises(ValueError, match="still being stored"):
        manager.prepare_load(keys(1), REQUEST)
    with pytest.raises(ValueError, match="not being loaded"):
        manager.complete_load(keys(1), REQUEST)
    with pytest.raises(ValueError, match="never prepared"):
        manager.complete_store(keys(7), REQUEST)


class GreedyPolicy(CachePolicy):
    """Breaks the contract: evicts whatever it holds, pinned or not."""

    def __init__(self) -> None:
        self.blocks: dict[OffloadKey, BlockStatus] = {}

    @override
    def get(self, key: OffloadKey) -> BlockStatus | None:
        return self.blocks.get(key)

    @override
    def insert(self, key: OffloadKey, block: BlockStatus) -> None:
        self.blocks[key] = block

    @override
    def remove(self, key: OffloadKey) -> None:
        self.blocks.pop(key, None)

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        return None

    @override
    def evict(self, n: int, protected: Set[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        chosen = list(self.blocks.items())[:n]
        for victim, _ in chosen:
            del self.blocks[victim]
        return chosen

    @override
    def clear(self) -> None:
        self.blocks.clear()

    @override
    def __len__(self) -> int:
        return len(self.blocks)


def test_a_policy_that_breaks_the_evict_contract_is_caught() -> None:
    manager = CPUOffloadingManager(1, GreedyPolicy())
    stored(manager, 1)
    manager.prepare_load(keys(1), REQUEST)
    with pytest.raises(RuntimeError, match="broke the evict"):
        manager.prepare_store(keys(2), REQUEST)


def test_duplicate_keys_in_one_batch_are_stored_once() -> None:
    manager = CPUOffloadingManager(4)
    output = manager.prepare_store(keys(1, 1, 2), REQUEST)
    assert output is not None and list(output.keys_to_store) == keys(1, 2)


UNIVERSE = keys(*range(10))


def test_complete_load_with_one_bad_key_unpins_nothing() -> None:
    manager = CPUOffloadingManager(4)
    stored(manager, 1, 2)
    manager.prepare_load(keys(1, 2), REQUEST)
    manager.prepare_store(keys(3), REQUEST)
    before = snapshot(manager, UNIVERSE)
    for batch, why in [
        (keys(1, 9), "it is not offloaded"),
        (keys(2, 3), "its store is still in flight"),
        (keys(1, 1), "it is named 2 times, pinned by 1 loads"),
    ]:
        with pytest.raises(
            ValueError, match=rf"complete_load: block .* is not being loaded \({why}\).*nothing was unpinned"
        ):
            manager.complete_load(batch, REQUEST)
        assert snapshot(manager, UNIVERSE) == before
    manager.complete_load(iter(keys(2, 1)), REQUEST)
    assert manager.stats().loaded == 2


@pytest.mark.parametrize("success", [True, False])
def test_duplicates_in_complete_store_are_a_value_error_that_changes_nothing(success: bool) -> None:
    manager = CPUOffloadingManager(4, enable_events=True)
    manager.prepare_store(keys(1, 2), REQUEST)
    before = snapshot(manager, UNIVERSE)
    with pytest.raises(ValueError, match="complete_store: block .* is named twice.*nothing was completed"):
        manager.complete_store(keys(1, 2, 1), REQUEST, success=success)
    with pytest.raises(ValueError, match="complete_store: block .* was never prepared"):
        manager.complete_store(keys(2, 7), REQUEST, success=success)
    assert snapshot(manager, UNIVERSE) == before
    assert manager.take_events() == []
    manager.complete_store(keys(1, 2), REQUEST, success=success)
    stats = manager.stats()
    assert (stats.stored, stats.failed_stores) == ((2, 0) if success else (0, 2))


@pytest.mark.parametrize("success", [True, False])
def test_only_the_request_that_prepared_a_store_completes_it(success: bool) -> None:
    manager = CPUOffloadingManager(4)
    owner, other = ReqContext("owner"), ReqContext("other")
    manager.prepare_store(keys(1, 2), owner)
    stored(manager, 3)
    before = snapshot(manager, UNIVERSE)
    with pytest.raises(ValueError, match=r"the store of block .* belongs to 'owner', not 'other'"):
        manager.complete_store(keys(3, 1), other, success=success)
    assert snapshot(manager, UNIVERSE) == before
    manager.complete_store(keys(1, 2), ReqContext("owner"), success=success)
    expected = LookupResult.HIT if success else LookupResult.MISS
    assert manager.lookup(key(1), other) is expected


def test_the_reuse_filter_forwards_refused_completions_unchanged() -> None:
    inner = CPUOffloadingManager(4)
    manager = FilterReusedOffloadingManager(inner)
    for offer in range(2):
        manager.prepare_store(keys(1), ReqContext(f"offer-{offer}"))
    before = snapshot(inner, UNIVERSE)
    with pytest.raises(ValueError, match="belongs to 'offer-1', not 'request'"):
        manager.complete_store(keys(1), REQUEST, success=False)
    with pytest.raises(ValueError, match="complete_load: block .* is not being loaded"):
        manager.complete_load(keys(1), REQUEST)
    assert snapshot(inner, UNIVERSE) == before
    manager.complete_store(keys(1), ReqContext("offer-1"))
    assert manager.lookup(key(1), REQUEST) is LookupResult.HIT


class KeepsVictimsLRU(LRUPolicy):
    """Overrides ``evict`` and leaves its victims in the table it would share with the manager."""

    @override
    def evict(self, n: int, protected: Set[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        victims = self._select(n, protected)
        return None if victims is None else [(key, self.blocks[key]) for key in victims]


def test_a_policy_base_that_overrides_a_table_method_does_not_share_its_table() -> None:
    manager = CPUOffloadingManager(2, KeepsVictimsLRU(8))
    stored(manager, 1, 2)
    stored(manager, 3)
    found = [manager.lookup(key(n), REQUEST) for n in (1, 2, 3)]
    assert found.count(LookupResult.HIT) == 2 and found.count(LookupResult.MISS) == 1
