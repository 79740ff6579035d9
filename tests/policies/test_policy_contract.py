"""What every built-in policy promises through the CachePolicy contract."""

from __future__ import annotations

import pytest
from typing_extensions import override

from kvcontract import BlockStatus, CachePolicy
from kvcontract.policies import get_policy
from tests.policies.support import POLICY_NAMES, key, keys, ready


@pytest.fixture(params=POLICY_NAMES)
def policy(request: pytest.FixtureRequest) -> CachePolicy:
    name: str = request.param
    return get_policy(name)(4)


def fill(policy: CachePolicy, *numbers: int) -> dict[int, BlockStatus]:
    blocks = {number: ready(number) for number in numbers}
    for number, block in blocks.items():
        policy.insert(key(number), block)
    policy.touch(keys(*numbers))
    return blocks


def test_insert_get_len_and_remove(policy: CachePolicy) -> None:
    blocks = fill(policy, 1, 2)
    assert len(policy) == 2
    assert policy.get(key(1)) is blocks[1]
    assert policy.get(key(9)) is None
    policy.remove(key(1))
    policy.remove(key(9))
    assert len(policy) == 1 and policy.get(key(1)) is None


def test_insert_rejects_a_held_key_and_a_full_pool(policy: CachePolicy) -> None:
    fill(policy, 1, 2, 3, 4)
    with pytest.raises(ValueError, match=r"\.insert: .* is already held"):
        policy.insert(key(1), ready())
    with pytest.raises(ValueError, match=r"\.insert: full"):
        policy.insert(key(5), ready())


def test_evict_returns_exactly_n_held_blocks(policy: CachePolicy) -> None:
    blocks = fill(policy, 1, 2, 3, 4)
    victims = policy.evict(3, frozenset())
    assert victims is not None and len(victims) == 3
    assert len({victim for victim, _ in victims}) == 3
    for victim, block in victims:
        assert block in blocks.values() and policy.get(victim) is None
    assert len(policy) == 1
    assert policy.evict(0, frozenset()) == []


def test_evict_never_takes_protected_pinned_or_in_flight_blocks(policy: CachePolicy) -> None:
    blocks = fill(policy, 1, 2, 3, 4)
    blocks[1].ref_cnt = 2
    blocks[2].ref_cnt = -1
    victims = policy.evict(1, frozenset(keys(3)))
    assert victims == [(key(4), blocks[4])]


def test_evict_that_cannot_succeed_returns_none_and_changes_nothing(policy: CachePolicy) -> None:
    blocks = fill(policy, 1, 2, 3, 4)
    blocks[1].ref_cnt = 1
    assert policy.evict(3, frozenset(keys(2))) is None
    assert len(policy) == 4
    assert all(policy.get(key(number)) is block for number, block in blocks.items())
    assert policy.evict(5, frozenset()) is None


def test_blocks_met_while_busy_are_evictable_once_released(policy: CachePolicy) -> None:
    blocks = fill(policy, 1, 2, 3, 4)
    for block in blocks.values():
        block.ref_cnt = 1
    assert policy.evict(1, frozenset()) is None
    blocks[3].ref_cnt = 0
    assert policy.evict(1, frozenset()) == [(key(3), blocks[3])]


def test_hints_are_optional_and_honoured(policy: CachePolicy) -> None:
    blocks = fill(policy, 1, 2)
    blocks[1].ref_cnt = 1
    policy.mark_non_evictable(key(1))
    assert policy.evict(1, frozenset()) == [(key(2), blocks[2])]
    blocks[1].ref_cnt = 0
    policy.mark_evictable(key(1))
    assert policy.evict(1, frozenset()) == [(key(1), blocks[1])]


def test_touch_of_unknown_keys_is_ignored(policy: CachePolicy) -> None:
    fill(policy, 1)
    policy.touch(keys(7, 1, 8))
    assert len(policy) == 1


def test_clear_drops_everything(policy: CachePolicy) -> None:
    blocks = fill(policy, 1, 2, 3)
    blocks[2].ref_cnt = 1
    policy.mark_non_evictable(key(2))
    policy.clear()
    assert len(policy) == 0 and policy.get(key(2)) is None
    fill(policy, 5, 6, 7, 8)
    assert len(policy) == 4


def test_negative_n_and_bad_capacity_are_rejected() -> None:
    for name in POLICY_NAMES:
        with pytest.raises(ValueError, match="capacity"):
            get_policy(name)(0)
        with pytest.raises(ValueError, match="n must be"):
            get_policy(name)(2).evict(-1, frozenset())


class CountedBlock(BlockStatus):
    """A block that counts how often a policy reads its reference count."""

    __slots__ = ()
    reads = 0

    @override
    def __getattribute__(self, name: str) -> object:
        if name == "ref_cnt":
            CountedBlock.reads += 1
        return super().__getattribute__(name)


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_a_pinned_block_is_not_scanned_again_by_every_eviction(name: str) -> None:
    policy = get_policy(name)(100)
    pinned = [CountedBlock(number, 1) for number in range(50)]
    for number, block in enumerate(pinned):
        policy.insert(key(number), block)
    for number in range(50, 100):
        policy.insert(key(number), ready(number))
    policy.touch(keys(*range(50, 100)))
    CountedBlock.reads = 0
    for _ in range(50):
        assert policy.evict(1, frozenset()) is not None
    assert CountedBlock.reads <= 3 * len(pinned)
