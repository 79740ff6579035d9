"""``insert_many`` is a batch of inserts: the same victims afterwards, and all or nothing."""

from __future__ import annotations

from collections.abc import Sequence, Set

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typing_extensions import override

from kvcontract import BlockStatus, CachePolicy, OffloadKey
from kvcontract.policies import get_policy
from tests.policies.support import POLICY_NAMES, key, keys, ready

CAPACITY = 8
STEPS = st.lists(
    st.tuples(
        st.lists(st.integers(0, 30), unique=True, max_size=5),
        st.lists(st.integers(0, 30), max_size=6),
        st.integers(0, 3),
    ),
    max_size=25,
)


@pytest.mark.parametrize("name", POLICY_NAMES)
@settings(max_examples=50, deadline=None)
@given(steps=STEPS)
def test_a_batch_evicts_like_the_same_inserts_one_by_one(
    name: str, steps: list[tuple[list[int], list[int], int]]
) -> None:
    one, batched = get_policy(name)(CAPACITY), get_policy(name)(CAPACITY)
    held: set[OffloadKey] = set()
    for numbers, touched, n in steps:
        new = [k for k in keys(*numbers) if k not in held][: CAPACITY - len(held)]
        for k in new:
            one.insert(k, ready())
        batched.insert_many(new, [ready() for _ in new])
        held.update(new)
        one.touch(keys(*touched))
        batched.touch(keys(*touched))
        expected, victims = one.evict(n, frozenset()), batched.evict(n, frozenset())
        assert (expected is None) == (victims is None)
        if expected is not None and victims is not None:
            assert [k for k, _ in victims] == [k for k, _ in expected]
            held.difference_update(k for k, _ in expected)
        assert len(batched) == len(one) == len(held)


@pytest.mark.parametrize("name", POLICY_NAMES)
@pytest.mark.parametrize(
    ("numbers", "count", "message"),
    [
        ((2, 1), 2, r"\.insert_many: .* is already held"),
        ((2, 3, 4), 3, r"\.insert_many: full"),
        ((2, 2), 2, r"\.insert_many: a key appears twice"),
        ((2,), 0, r"\.insert_many: .*one block per key"),
    ],
    ids=["held key", "too many", "repeated key", "lengths differ"],
)
def test_a_refused_batch_changes_nothing(name: str, numbers: tuple[int, ...], count: int, message: str) -> None:
    policy = get_policy(name)(3)
    first = ready(1)
    policy.insert(key(1), first)
    with pytest.raises(ValueError, match=message):
        policy.insert_many(keys(*numbers), [ready() for _ in range(count)])
    assert len(policy) == 1 and policy.get(key(1)) is first and policy.get(key(2)) is None
    assert policy.evict(1, frozenset()) == [(key(1), first)]


class OneByOne(CachePolicy):
    """A policy that implements ``insert`` only, so it gets the contract's ``insert_many``."""

    def __init__(self) -> None:
        self.inserted: list[OffloadKey] = []

    @override
    def get(self, key: OffloadKey) -> BlockStatus | None:
        return None

    @override
    def insert(self, key: OffloadKey, block: BlockStatus) -> None:
        self.inserted.append(key)

    @override
    def remove(self, key: OffloadKey) -> None:
        return None

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        return None

    @override
    def evict(self, n: int, protected: Set[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        return None

    @override
    def clear(self) -> None:
        return None

    @override
    def __len__(self) -> int:
        return len(self.inserted)


def test_the_contract_default_inserts_each_pair_in_order() -> None:
    policy = OneByOne()
    policy.insert_many(keys(3, 1, 2), [ready(), ready(), ready()])
    assert policy.inserted == keys(3, 1, 2)
    with pytest.raises(ValueError, match="one block per key"):
        policy.insert_many(keys(4), [])
