"""LRU: the least recently used block goes first, and a request's chain loses its tail first."""

from __future__ import annotations

from kvcontract.policies import LRUPolicy
from tests.policies.support import key, keys, ready


def test_evicts_least_recently_used_first() -> None:
    policy = LRUPolicy(3)
    for number in (1, 2, 3):
        policy.insert(key(number), ready(number))
    policy.touch(keys(1))
    victims = policy.evict(2, frozenset())
    assert victims is not None and [victim for victim, _ in victims] == keys(2, 3)


def test_touch_leaves_the_first_key_most_recent_so_chains_lose_their_tail_first() -> None:
    policy = LRUPolicy(4)
    for number in (1, 2, 3, 4):
        policy.insert(key(number), ready(number))
    policy.touch(keys(1, 2, 3, 4))
    victims = policy.evict(3, frozenset())
    assert victims is not None and [victim for victim, _ in victims] == keys(4, 3, 2)


def test_a_protected_key_keeps_its_place() -> None:
    policy = LRUPolicy(3)
    for number in (1, 2, 3):
        policy.insert(key(number), ready(number))
    for expected in (2, 3):
        victims = policy.evict(1, frozenset(keys(1)))
        assert victims is not None and victims[0][0] == key(expected)
    policy.insert(key(4), ready(4))
    victims = policy.evict(1, frozenset())
    assert victims is not None and victims[0][0] == key(1)
