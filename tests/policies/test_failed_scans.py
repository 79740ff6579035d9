"""Eviction order does not depend on failed scans, and a block a scan parked returns to its place."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcontract import BlockStatus, CachePolicy
from kvcontract.policies import get_policy
from tests.policies.support import POLICY_NAMES, key, keys, ready

CAPACITY = 6
STEPS = st.lists(
    st.tuples(
        st.sampled_from(["insert", "pin", "release", "touch", "evict", "fail"]),
        st.integers(0, 9),
        st.integers(1, 3),
    ),
    max_size=40,
)


def victims(policy: CachePolicy, n: int, protected: frozenset[int] = frozenset()) -> list[int] | None:
    evicted = policy.evict(n, frozenset(key(number) for number in protected))
    return None if evicted is None else [int.from_bytes(k[:8], "big") for k, _ in evicted]


@pytest.mark.parametrize("name", POLICY_NAMES)
@settings(max_examples=150, deadline=None)
@given(steps=STEPS)
def test_a_failed_eviction_changes_no_later_victim(name: str, steps: list[tuple[str, int, int]]) -> None:
    """Two policies see the same calls, and one also failing evictions: their victims agree.

    Releases send ``mark_evictable``, so neither policy learns of a release later than
    the other; a failed eviction's re-checks then have nothing to change.
    """
    plain, tried = get_policy(name)(CAPACITY), get_policy(name)(CAPACITY)
    held: dict[int, tuple[BlockStatus, BlockStatus]] = {}
    for action, number, n in steps:
        if action == "insert" and number not in held and len(held) < CAPACITY:
            held[number] = (ready(number), ready(number))
            plain.insert(key(number), held[number][0])
            tried.insert(key(number), held[number][1])
        elif action in ("pin", "release") and number in held:
            for policy, block in zip((plain, tried), held[number]):
                block.ref_cnt = 1 if action == "pin" else 0
                if action == "release":
                    policy.mark_evictable(key(number))
        elif action == "touch":
            plain.touch(keys(number, (number + n) % 10))
            tried.touch(keys(number, (number + n) % 10))
        elif action == "evict":
            expected = victims(plain, n)
            assert victims(tried, n) == expected
            for victim in expected or []:
                del held[victim]
        elif action == "fail":
            assert victims(tried, len(held) + 1) is None


@pytest.mark.parametrize("name", ["lru", "arc", "s3fifo", "prefix_reuse"])
def test_a_block_parked_by_a_scan_returns_to_its_place(name: str) -> None:
    policy = get_policy(name)(8)
    blocks = [ready(number) for number in range(4)]
    for number, block in enumerate(blocks):
        policy.insert(key(number), block)
    blocks[0].ref_cnt = 1
    assert victims(policy, 1) == [1]
    blocks[0].ref_cnt = 0
    assert victims(policy, 1) == [0]
    assert victims(policy, 2) == [2, 3]


def test_sieve_passes_a_pinned_block_and_keeps_its_place() -> None:
    policy = get_policy("sieve")(8)
    blocks = [ready(number) for number in range(4)]
    for number, block in enumerate(blocks):
        policy.insert(key(number), block)
    blocks[0].ref_cnt = 1
    assert victims(policy, 1) == [1]
    blocks[0].ref_cnt = 0
    assert victims(policy, 2) == [2, 3]
    assert victims(policy, 1) == [0]


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_a_failed_eviction_that_met_pinned_blocks_leaves_the_order(name: str) -> None:
    policy = get_policy(name)(4)
    blocks = [ready(number) for number in range(4)]
    for number, block in enumerate(blocks):
        policy.insert(key(number), block)
    policy.touch(keys(2))
    blocks[1].ref_cnt = blocks[3].ref_cnt = 1
    assert victims(policy, 3) is None
    blocks[1].ref_cnt = blocks[3].ref_cnt = 0
    reference = get_policy(name)(4)
    for number in range(4):
        reference.insert(key(number), ready(number))
    reference.touch(keys(2))
    assert victims(policy, 4) == victims(reference, 4)
