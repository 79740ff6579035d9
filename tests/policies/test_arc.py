"""ARC: T1/T2, ghost lists B1/B2, the adaptive target and its bounds."""

from __future__ import annotations

from kvcontract import BlockStatus
from kvcontract.policies import ARCPolicy
from tests.policies.support import key, keys, ready


def victims_of(policy: ARCPolicy, n: int) -> list[int]:
    victims = policy.evict(n, frozenset())
    assert victims is not None
    return [int.from_bytes(victim[:8], "big") for victim, _ in victims]


def test_a_second_use_protects_a_block_from_one_time_blocks() -> None:
    policy = ARCPolicy(3)
    for number in (1, 2, 3):
        policy.insert(key(number), ready(number))
    policy.touch(keys(1))
    assert victims_of(policy, 1) == [2]
    policy.insert(key(4), ready(4))
    assert victims_of(policy, 2) == [3, 4]
    assert policy.get(key(1)) is not None


def test_touching_a_block_whose_store_is_in_flight_is_not_a_reuse() -> None:
    policy = ARCPolicy(2)
    in_flight = BlockStatus(1)
    policy.insert(key(1), in_flight)
    policy.touch(keys(1))
    in_flight.ref_cnt = 0
    policy.insert(key(2), ready(2))
    policy.touch(keys(2))
    assert victims_of(policy, 1) == [1]
    assert policy.ghost_sizes == (1, 0)


def test_a_hit_in_b1_grows_the_target_and_a_hit_in_b2_shrinks_it() -> None:
    policy = ARCPolicy(2)
    for number in (1, 2):
        policy.insert(key(number), ready(number))
    assert victims_of(policy, 1) == [1]
    assert policy.ghost_sizes == (1, 0)
    policy.insert(key(1), ready(1))
    assert policy.target_t1 == 1.0 and policy.ghost_sizes == (0, 0)
    policy.touch(keys(2))
    assert victims_of(policy, 1) == [1]
    assert policy.ghost_sizes == (0, 1)
    policy.insert(key(1), ready(1))
    assert policy.target_t1 == 0.0


def test_eviction_prefers_t1_while_it_exceeds_the_target() -> None:
    policy = ARCPolicy(3)
    for number in (1, 2):
        policy.insert(key(number), ready(number))
    policy.touch(keys(1))
    policy.insert(key(3), ready(3))
    assert victims_of(policy, 1) == [2]


def test_ghost_lists_stay_bounded_by_the_capacity() -> None:
    policy = ARCPolicy(8)
    for number in range(300):
        if len(policy) == 8:
            victims_of(policy, 1)
        policy.insert(key(number % 40), ready(number)) if policy.get(key(number % 40)) is None else None
        if number % 3 == 0:
            policy.touch(keys(number % 40))
        b1, b2 = policy.ghost_sizes
        assert b1 + b2 <= 8
