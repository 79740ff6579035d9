"""ForwardingManager: every contract method of OffloadingManager reaches the wrapped manager."""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from typing import get_type_hints
from unittest import mock

import pytest
from typing_extensions import override

from kvcontract import LookupResult, OffloadingManager, OffloadKey, ReqContext
from kvcontract.enforce import checks_enabled, configure
from kvcontract.managers import (
    CPUOffloadingManager,
    EvictionListener,
    FilterReusedOffloadingManager,
    ForwardingManager,
    ReportsEvictions,
)
from tests.policies.support import key, keys

CONTRACT_METHODS = sorted(
    name for name, member in vars(OffloadingManager).items() if inspect.isfunction(member) and not name.startswith("_")
)
"""Read from the Protocol itself, so a method the contract gains later is tested too."""


@pytest.fixture
def checks_off() -> Iterator[None]:
    """Call checks off, so a forwarded call may carry marker objects instead of real values."""
    before = checks_enabled()
    configure(checks=False)
    yield
    configure(checks=before)


def test_the_contract_methods_are_read_from_the_protocol() -> None:
    assert {"lookup", "complete_load", "complete_store", "take_events", "shutdown"} <= set(CONTRACT_METHODS)


@pytest.mark.usefixtures("checks_off")
@pytest.mark.parametrize("name", CONTRACT_METHODS)
def test_every_contract_method_is_forwarded_with_its_arguments_and_result(name: str) -> None:
    inner = mock.create_autospec(OffloadingManager, instance=True)
    result = object()
    getattr(inner, name).return_value = result
    parameters = list(inspect.signature(getattr(OffloadingManager, name)).parameters)[1:]
    arguments = [object() for _ in parameters]
    returns_none = get_type_hints(getattr(OffloadingManager, name))["return"] is type(None)
    assert getattr(ForwardingManager(inner), name)(*arguments) is (None if returns_none else result)
    getattr(inner, name).assert_called_once_with(*arguments)
    assert [call[0] for call in inner.method_calls] == [name]


class CountingLookups(ForwardingManager):
    """A decorator that changes one call and inherits the rest."""

    def __init__(self, inner: OffloadingManager) -> None:
        super().__init__(inner)
        self.lookups = 0

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        self.lookups += 1
        return super().lookup(key, req_context)


def test_a_decorator_overrides_one_call_and_forwards_the_optional_ones() -> None:
    inner = CPUOffloadingManager(4, enable_events=True)
    manager = CountingLookups(inner)
    context = ReqContext("a")
    output = manager.prepare_store(keys(1, 2), context)
    assert output is not None
    manager.complete_store(output.keys_to_store, context)
    assert manager.lookup(key(1), context) is LookupResult.HIT and manager.lookups == 1
    manager.prepare_load(keys(1), context)
    manager.complete_load(keys(1), context)
    assert inner.stats().loaded == 1
    assert [event.removed for event in manager.take_events()] == [False]
    assert manager.inner is inner and repr(manager) == f"CountingLookups({inner!r})"


def test_the_reuse_filter_is_a_forwarding_manager() -> None:
    assert issubclass(FilterReusedOffloadingManager, ForwardingManager)


class EvictsOnItsOwn(ForwardingManager):
    """A manager that would report its own evictions, as the tiering manager's promotions do."""

    def __init__(self, inner: OffloadingManager) -> None:
        super().__init__(inner)
        self.registered: list[EvictionListener] = []

    @override
    def add_eviction_listener(self, listener: EvictionListener) -> None:
        self.registered.append(listener)


def test_eviction_listeners_pass_through_a_decorator_to_the_manager_that_evicts() -> None:
    source = EvictsOnItsOwn(CPUOffloadingManager(4))
    heard: list[Sequence[OffloadKey]] = []
    ForwardingManager(ForwardingManager(source)).add_eviction_listener(heard.append)
    assert source.registered == [heard.append]


def test_a_listener_is_dropped_over_a_manager_that_never_evicts_on_its_own() -> None:
    assert not isinstance(CPUOffloadingManager(4), ReportsEvictions)
    heard: list[Sequence[OffloadKey]] = []
    ForwardingManager(CPUOffloadingManager(4)).add_eviction_listener(heard.append)
    assert heard == []


def test_an_inner_object_that_is_not_a_manager_is_refused_with_what_it_lacks() -> None:
    not_a_manager: OffloadingManager = mock.Mock(spec=["lookup", "touch"])
    with pytest.raises(ValueError, match="inner must be an OffloadingManager; .* lacks prepare_load, prepare_store"):
        ForwardingManager(not_a_manager)
