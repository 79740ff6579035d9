"""The reuse filter: store a block only from the ``store_threshold``-th request that offers it."""

from __future__ import annotations

from typing import Any

import pytest

from kvcontract import LookupResult, OffloadingManager, ReqContext
from kvcontract.managers import CPUOffloadingManager, FilterReusedOffloadingManager
from tests.policies.support import key, keys


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
    assert manager.stats() == inner.stats() and manager.stats().loaded == 1
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
