"""S3-FIFO: probation in the small queue, promotion on use, ghost admission to the main queue."""

from __future__ import annotations

import pytest

from kvcontract import OffloadKey
from kvcontract.policies import S3FIFOPolicy
from tests.policies.support import key, keys, ready


def victims_of(policy: S3FIFOPolicy, n: int) -> list[int]:
    victims = policy.evict(n, frozenset())
    assert victims is not None
    return [int.from_bytes(victim[:8], "big") for victim, _ in victims]


def test_new_blocks_enter_the_small_queue_and_unused_ones_leave_first() -> None:
    policy = S3FIFOPolicy(10)
    for number in range(10):
        policy.insert(key(number), ready(number))
    assert policy.queue_sizes == (10, 0, 0)
    assert victims_of(policy, 2) == [0, 1]
    assert policy.queue_sizes == (8, 0, 2)


def test_a_block_used_in_the_small_queue_moves_to_main_instead_of_leaving() -> None:
    policy = S3FIFOPolicy(10)
    for number in range(10):
        policy.insert(key(number), ready(number))
    policy.touch(keys(0))
    assert victims_of(policy, 1) == [1]
    assert policy.queue_sizes == (8, 1, 1)


def test_a_key_remembered_by_the_ghost_queue_is_admitted_to_main() -> None:
    policy = S3FIFOPolicy(10)
    for number in range(10):
        policy.insert(key(number), ready(number))
    assert victims_of(policy, 1) == [0]
    policy.insert(key(0), ready(0))
    assert policy.queue_sizes == (9, 1, 0)


def test_main_queue_reinserts_used_blocks_and_decrements_their_counter() -> None:
    policy = S3FIFOPolicy(10)
    for number in range(10):
        policy.insert(key(number), ready(number))
    policy.touch(keys(*range(10)))
    assert victims_of(policy, 1) == [0]
    assert policy.queue_sizes == (0, 9, 0)
    policy.touch(keys(1))
    assert victims_of(policy, 2) == [2, 3]
    assert victims_of(policy, 7) == [4, 5, 6, 7, 8, 9, 1]


@pytest.mark.parametrize("hold", ["protected", "pinned"])
def test_a_used_block_moves_to_main_even_when_it_cannot_be_evicted(hold: str) -> None:
    policy = S3FIFOPolicy(10)
    for number in range(10):
        policy.insert(key(number), ready(number))
    policy.touch(keys(0))
    protected: frozenset[OffloadKey] = frozenset(keys(0) if hold == "protected" else ())
    block = policy.get(key(0))
    assert block is not None
    if hold == "pinned":
        block.ref_cnt = 1
    victims = policy.evict(1, protected)
    assert victims is not None
    assert [int.from_bytes(victim[:8], "big") for victim, _ in victims] == [1]
    assert policy.queue_sizes == (8, 1, 1)
