"""The example package works through kvcontract's registry and managers."""

from __future__ import annotations

import pytest
from custom_policy import FIFOPolicy, MetricsManager

from kvcontract import ContractViolation, LookupResult, ReqContext, make_offload_key
from kvcontract.managers import CPUOffloadingManager, ForwardingManager
from kvcontract.policies import available_policies, get_policy

KEYS = [make_offload_key(bytes([i]) * 8) for i in range(4)]


def test_policy_is_found_through_its_entry_point() -> None:
    assert "fifo-example" in available_policies()
    assert get_policy("fifo-example") is FIFOPolicy


def test_fifo_evicts_the_oldest_store_even_when_touched() -> None:
    manager = CPUOffloadingManager(2, "fifo-example")
    ctx = ReqContext("r")
    for key in KEYS[:2]:
        manager.prepare_store([key], ctx)
        manager.complete_store([key], ctx)
    manager.touch([KEYS[0]], ctx)
    plan = manager.prepare_store([KEYS[2]], ctx)
    assert plan is not None
    assert list(plan.evicted_keys) == [KEYS[0]]


def test_metrics_decorator_counts_per_request() -> None:
    manager = MetricsManager(CPUOffloadingManager(4, FIFOPolicy(4)))
    first = ReqContext("first")
    manager.prepare_store(KEYS[:2], first)
    manager.complete_store(iter(KEYS[:2]), first)
    manager.on_request_finished(first)
    second = ReqContext("second")
    assert [manager.lookup(k, second) for k in KEYS[:3]] == [
        LookupResult.HIT,
        LookupResult.HIT,
        LookupResult.MISS,
    ]
    manager.prepare_load(KEYS[:2], second)
    manager.complete_load(KEYS[:2], second)
    manager.on_request_finished(second)
    assert [(m.req_id, m.hits, m.loaded, m.stored) for m in manager.finished] == [
        ("first", 0, 0, 2),
        ("second", 2, 2, 0),
    ]


def test_the_decorator_gets_kvcontracts_runtime_checks() -> None:
    manager = MetricsManager(CPUOffloadingManager(4))
    with pytest.raises(ContractViolation, match="MetricsManager.prepare_store"):
        manager.prepare_store(set(KEYS), ReqContext("r"))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def test_the_decorator_remembers_only_the_most_recent_finished_requests() -> None:
    manager = MetricsManager(CPUOffloadingManager(4), keep=2)
    for name in ("a", "b", "c"):
        manager.on_request_finished(ReqContext(name))
    assert [m.req_id for m in manager.finished] == ["b", "c"]


def test_calls_the_decorator_does_not_override_reach_the_inner_manager() -> None:
    inner = CPUOffloadingManager(4, enable_events=True)
    manager = MetricsManager(inner)
    assert isinstance(manager, ForwardingManager) and manager.inner is inner
    ctx = ReqContext("r")
    plan = manager.prepare_store(KEYS[:1], ctx)
    assert plan is not None
    manager.complete_store(plan.keys_to_store, ctx)
    assert [event.removed for event in manager.take_events()] == [False]
    manager.reset_cache()
    assert inner.stats().used == 0


def test_a_load_the_inner_manager_refuses_counts_nothing() -> None:
    manager = MetricsManager(CPUOffloadingManager(4))
    ctx = ReqContext("r")
    with pytest.raises(ValueError, match="prepare_load"):
        manager.prepare_load(KEYS[:1], ctx)
    manager.on_request_finished(ctx)
    assert manager.finished[-1].loaded == 0
