"""The sampled default checks one element of a container per call; full mode checks them all."""

from __future__ import annotations

import subprocess
import sys
from collections import UserList
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from typing import cast

import pytest
from beartype import BeartypeConf
from beartype.door import is_bearable
from hypothesis import given, settings
from hypothesis import strategies as st
from typing_extensions import override

from kvcontract import (
    BlockIdsSpec,
    BlockStatus,
    ContractViolation,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
    make_offload_key,
)
from kvcontract.enforce import CHECK_MODES, checked, checks_mode, configure
from kvcontract.policies import LRUPolicy
from tests.contracts.support import RecordingManager


@pytest.fixture(autouse=True)
def sampled_after() -> Iterator[None]:
    """Every test leaves the checks on and sampled, as the other tests expect them."""
    yield
    configure(checks=True, full=False)


GOOD = make_offload_key(b"g" * 8)
"""A well-formed key."""

ELEMENTS = st.one_of(st.just(GOOD), st.integers(), st.text(max_size=3), st.none())
"""Keys and things that are not keys, as a confused caller might mix them."""


@settings(deadline=None)  # the first example re-wraps every contract class for full mode
@given(st.lists(ELEMENTS, max_size=40))
def test_full_mode_refuses_a_sequence_exactly_when_some_element_is_not_a_key(
    values: list[object],
) -> None:
    configure(checks=True, full=True)
    manager = RecordingManager()
    ctx = ReqContext("r")
    all_keys = all(isinstance(value, bytes) for value in values)
    for call in (manager.touch, manager.prepare_store):
        if all_keys:
            call(values, ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]  # the test mixes types
            continue
        with pytest.raises(ContractViolation) as raised:
            call(values, ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]  # the test mixes types
        first_bad = next(i for i, value in enumerate(values) if not isinstance(value, bytes))
        assert f"received list whose element {first_bad} is {type(values[first_bad]).__name__}" in str(raised.value)


def test_sampled_mode_checks_one_element_per_call() -> None:
    """O(1) per call: a bad element behind a good first one is not seen; full mode sees it."""
    manager = RecordingManager()
    ctx = ReqContext("r")
    late_bad: list[object] = [GOOD] * 1000
    late_bad.append("not a key")
    assert checks_mode() == "on"
    manager.touch(late_bad, ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]  # the test mixes types
    with pytest.raises(ContractViolation, match="received list whose element 0 is str"):
        manager.touch(["not a key", GOOD], ctx)  # type: ignore[list-item]  # pyright: ignore[reportArgumentType]  # the test mixes types
    configure(full=True)
    assert checks_mode() == "full"
    with pytest.raises(ContractViolation, match="received list whose element 1000 is str"):
        manager.touch(late_bad, ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]  # the test mixes types


class SloppyPolicy(LRUPolicy):
    """Evicts a list whose second pair holds a string where a BlockStatus belongs."""

    @override
    def evict(self, n: int, protected: AbstractSet[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        return [(GOOD, BlockStatus(0)), (GOOD, "free")]  # type: ignore[list-item]  # pyright: ignore[reportReturnType]  # the bug under test


def test_full_mode_checks_nested_return_values() -> None:
    policy = SloppyPolicy(4)
    assert policy.evict(2, frozenset()) is not None
    configure(full=True)
    with pytest.raises(
        ContractViolation,
        match=r"CachePolicy.evict\(\) implemented by SloppyPolicy.evict returned list whose element 1 is tuple",
    ):
        policy.evict(2, frozenset())


def test_full_mode_leaves_one_shot_iterables_unread() -> None:
    configure(full=True)
    manager = RecordingManager()
    keys = [make_offload_key(bytes([i]) * 8) for i in range(3)]
    manager.complete_store((key for key in keys), ReqContext("r"))
    assert manager.stored == keys


def test_full_mode_reaches_checked_proxies() -> None:
    configure(full=True)
    proxy = checked(RecordingManager(), RecordingManager.__mro__[1])
    with pytest.raises(ContractViolation, match="element 2 is int"):
        proxy.touch([GOOD, GOOD, 3], ReqContext("r"))  # type: ignore[list-item]  # pyright: ignore[reportArgumentType]  # the test mixes types


def test_configure_keeps_the_depth_when_only_switching_checks() -> None:
    configure(full=True)
    configure(checks=False)
    assert checks_mode() == "off"
    configure(checks=True)
    assert checks_mode() == "full"


@pytest.mark.parametrize("mode", CHECK_MODES)
def test_environment_chooses_the_mode(mode: str) -> None:
    probe = "import kvcontract.enforce as e; print(e.checks_mode())"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env={"KVCONTRACT_CHECKS": mode.upper()},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == mode


bearable = cast(Callable[..., bool], is_bearable)  # mypy cannot read these hints as type forms
"""``beartype.door.is_bearable``, callable with a hint held in a variable."""

SAMPLED = BeartypeConf(is_random=False)
"""The reference: beartype alone, sampling the first element as the sampled mode does."""

CONTAINERS = st.one_of(
    st.lists(ELEMENTS, max_size=4),
    st.lists(ELEMENTS, max_size=4).map(tuple),
    st.sets(st.one_of(st.just(GOOD), st.integers()), max_size=3),
    st.lists(ELEMENTS, max_size=4).map(lambda values: {i: v for i, v in enumerate(values)}.values()),
    st.lists(ELEMENTS, max_size=4).map(UserList),
    ELEMENTS,
)
"""Arguments a caller might pass for ``keys``: sequences, and things that are not."""

CONTEXTS = st.one_of(st.just(ReqContext("r")), st.text(max_size=2), st.none())


class Echo(RecordingManager):
    """Returns whatever it is told to, so return values can be checked against a reference."""

    answer: object = None

    @override
    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        return self.answer  # type: ignore[return-value]  # pyright: ignore[reportReturnType]  # the test chooses


ANSWERS = st.one_of(
    st.none(),
    st.just(PrepareStoreOutput([], BlockIdsSpec([]), [])),
    st.integers(),
    st.text(max_size=2),
)


@settings(deadline=None)  # the first example may re-wrap every contract class for sampled mode
@given(CONTAINERS, CONTEXTS, ANSWERS)
def test_sampled_checks_judge_every_call_as_beartype_alone_does(keys: object, context: object, answer: object) -> None:
    """The fast path in front of beartype accepts exactly what beartype accepts."""
    configure(checks=True, full=False)
    manager = Echo()
    manager.answer = answer
    arguments_ok = bearable(keys, Sequence[OffloadKey], conf=SAMPLED) and bearable(context, ReqContext, conf=SAMPLED)
    expected_ok = arguments_ok and bearable(answer, PrepareStoreOutput | None, conf=SAMPLED)
    try:
        manager.prepare_store(keys, context)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]  # the test mixes types
    except ContractViolation as error:
        assert not expected_ok, str(error)
        assert ("returned" in str(error)) is arguments_ok
    else:
        assert expected_ok
