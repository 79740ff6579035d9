"""The prefix-aware policy: reuse classes, tails first, history of evicted keys."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kvcontract import BlockStatus
from kvcontract.policies import PrefixReusePolicy
from tests.policies.support import key, keys


def victims_of(policy: PrefixReusePolicy, n: int) -> list[int]:
    victims = policy.evict(n, frozenset())
    assert victims is not None
    return [int.from_bytes(victim[:8], "big") for victim, _ in victims]


def store(policy: PrefixReusePolicy, *numbers: int) -> None:
    """Insert ``numbers`` as a request's new blocks, then touch the request's chain."""
    blocks = [BlockStatus(number) for number in numbers]
    for number, block in zip(numbers, blocks):
        policy.insert(key(number), block)
    policy.touch(keys(*numbers))
    for block in blocks:
        block.ref_cnt = 0


def test_a_chain_is_evicted_from_its_tail() -> None:
    policy = PrefixReusePolicy(8)
    store(policy, 1, 2, 3, 4)
    assert victims_of(policy, 3) == [4, 3, 2]


def test_the_first_touch_after_a_store_is_not_a_reuse_but_the_next_one_is() -> None:
    policy = PrefixReusePolicy(8)
    store(policy, 1, 2)
    assert policy.reuse_class(key(1)) == 0
    policy.touch(keys(1))
    assert policy.reuse_class(key(1)) == 1
    assert policy.reuse_class(key(2)) == 0


def test_a_reused_prefix_outlives_newer_blocks_used_once() -> None:
    policy = PrefixReusePolicy(6)
    store(policy, 1, 2)
    policy.touch(keys(1, 2))
    store(policy, 3, 4, 5, 6)
    assert victims_of(policy, 4) == [6, 5, 4, 3]
    assert policy.get(key(1)) is not None and policy.get(key(2)) is not None


def test_a_parent_is_never_evicted_before_its_child() -> None:
    policy = PrefixReusePolicy(6)
    store(policy, 1, 2, 3)
    for _ in range(5):
        policy.touch(keys(1, 2, 3))
    store(policy, 4, 5, 6)
    assert victims_of(policy, 6) == [6, 5, 4, 3, 2, 1]


def test_an_evicted_key_comes_back_with_its_history() -> None:
    policy = PrefixReusePolicy(2)
    store(policy, 1)
    assert victims_of(policy, 1) == [1]
    store(policy, 1)
    assert policy.reuse_class(key(1)) == 1


def test_classes_stop_at_the_last_bonus() -> None:
    policy = PrefixReusePolicy(4, bonus=(0.0, 1.0))
    store(policy, 1)
    for _ in range(5):
        policy.touch(keys(1))
    assert policy.reuse_class(key(1)) == 1


def test_reuse_distance_follows_the_workload() -> None:
    policy = PrefixReusePolicy(100, smoothing=0.5)
    store(policy, 1)
    start = policy.reuse_distance
    for _ in range(20):
        policy.touch(keys(1))
    assert policy.reuse_distance < start


@pytest.mark.parametrize(
    "build",
    [
        lambda: PrefixReusePolicy(4, history_factor=1),
        lambda: PrefixReusePolicy(4, bonus=(1.0,)),
        lambda: PrefixReusePolicy(4, bonus=(2.0, 1.0)),
        lambda: PrefixReusePolicy(4, bonus=(0.0, -1.0)),
        lambda: PrefixReusePolicy(4, smoothing=0.0),
    ],
)
def test_bad_options_are_rejected(build: Callable[[], PrefixReusePolicy]) -> None:
    with pytest.raises(ValueError):
        build()
