"""SIEVE: a hand sweeping from the oldest block, sparing visited blocks once."""

from __future__ import annotations

from kvcontract import BlockStatus
from kvcontract.policies import SIEVEPolicy
from tests.policies.support import key, keys, ready


def victims_of(policy: SIEVEPolicy, n: int) -> list[int]:
    victims = policy.evict(n, frozenset())
    assert victims is not None
    return [int.from_bytes(victim[:8], "big") for victim, _ in victims]


def test_the_hand_spares_a_visited_block_once_and_clears_its_bit() -> None:
    policy = SIEVEPolicy(4)
    for number in (1, 2, 3):
        policy.insert(key(number), ready(number))
    policy.touch(keys(1))
    assert policy.visited(key(1))
    assert victims_of(policy, 1) == [2]
    assert not policy.visited(key(1))
    assert victims_of(policy, 1) == [3]
    assert victims_of(policy, 1) == [1]


def test_the_hand_keeps_its_position_between_evictions() -> None:
    policy = SIEVEPolicy(4)
    for number in (1, 2, 3, 4):
        policy.insert(key(number), ready(number))
    policy.touch(keys(1, 3))
    assert victims_of(policy, 1) == [2]
    policy.insert(key(5), ready(5))
    policy.touch(keys(1))
    assert victims_of(policy, 1) == [4]
    assert victims_of(policy, 1) == [5]


def test_a_touch_while_the_store_is_in_flight_does_not_mark_visited() -> None:
    policy = SIEVEPolicy(2)
    block = BlockStatus(1)
    policy.insert(key(1), block)
    policy.touch(keys(1))
    assert not policy.visited(key(1))
