"""Every policy under random operation sequences, checked against its reference model after every step.

The models (``tests/policies/support.py``) name the exact victims of every eviction,
scans that meet pinned, in-flight or protected blocks included; ``prefix_reuse``,
which has no order model, is checked for the set of blocks it holds. Misuse (inserting
a held key, overfilling, a bad batch, a negative count) must raise and change nothing,
which the next exact eviction would notice.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvcontract import BlockStatus, CachePolicy, OffloadKey
from kvcontract.policies import get_policy
from tests.policies.support import (
    POLICY_NAMES,
    ARCModel,
    LRUModel,
    ModelPolicy,
    S3FIFOModel,
    SIEVEModel,
    key,
    keys,
)
from tests.profiles import stateful_settings

CAPACITY = 6
NUMBERS = st.integers(0, 8)
ALL_KEYS = keys(*range(9))
MODELS: dict[str, type[ModelPolicy]] = {
    "lru": LRUModel,
    "arc": ARCModel,
    "s3fifo": S3FIFOModel,
    "sieve": SIEVEModel,
}
STEPS = 50


class PolicyMachine(RuleBasedStateMachine):
    """Drives one policy and its model side by side; the blocks are shared objects."""

    policy_name = "lru"

    def __init__(self) -> None:
        super().__init__()
        self.policy: CachePolicy = get_policy(self.policy_name)(CAPACITY)
        model = MODELS.get(self.policy_name)
        self.model: ModelPolicy | None = model(CAPACITY) if model is not None else None
        self.held: dict[OffloadKey, BlockStatus] = {}
        self.next_id = 0

    def new_block(self, in_flight: bool) -> BlockStatus:
        self.next_id += 1
        return BlockStatus(self.next_id, -1 if in_flight else 0)

    @rule(number=NUMBERS, in_flight=st.booleans())
    def insert(self, number: int, in_flight: bool) -> None:
        if key(number) in self.held or len(self.held) >= CAPACITY:
            return
        block = self.new_block(in_flight)
        self.policy.insert(key(number), block)
        self.held[key(number)] = block
        if self.model is not None:
            self.model.insert(key(number), block)

    @rule(numbers=st.lists(NUMBERS, max_size=4, unique=True), in_flight=st.booleans())
    def insert_many(self, numbers: list[int], in_flight: bool) -> None:
        new = [k for k in keys(*numbers) if k not in self.held]
        if len(self.held) + len(new) > CAPACITY:
            return
        blocks = [self.new_block(in_flight) for _ in new]
        self.policy.insert_many(new, blocks)
        self.held.update(zip(new, blocks))
        if self.model is not None:
            for k, block in zip(new, blocks):
                self.model.insert(k, block)

    @precondition(lambda self: bool(self.held))
    @rule(index=st.integers(0, CAPACITY - 1), change=st.sampled_from(["pin", "unpin", "complete"]), hint=st.booleans())
    def change_reference_count(self, index: int, change: str, hint: bool) -> None:
        """Pin, unpin or complete the ``index``-th held block (oldest inserted first)."""
        held = list(self.held)
        number = int.from_bytes(held[index % len(held)][:8], "big")
        block = self.held[key(number)]
        if change == "pin" and block.ref_cnt >= 0:
            block.ref_cnt += 1
            if hint and block.ref_cnt == 1:
                self.policy.mark_non_evictable(key(number))
        elif (change == "unpin" and block.ref_cnt > 0) or (change == "complete" and block.ref_cnt == -1):
            block.ref_cnt = block.ref_cnt - 1 if change == "unpin" else 0
            if hint and block.ref_cnt == 0:
                self.policy.mark_evictable(key(number))
                if self.model is not None:
                    self.model.mark_evictable(key(number))

    @rule(numbers=st.lists(NUMBERS, max_size=8))
    def touch(self, numbers: list[int]) -> None:
        self.policy.touch(keys(*numbers))
        if self.model is not None:
            self.model.touch(keys(*numbers))

    @rule(number=NUMBERS)
    def remove(self, number: int) -> None:
        self.policy.remove(key(number))
        self.held.pop(key(number), None)
        if self.model is not None:
            self.model.remove(key(number))

    @rule(
        n=st.integers(0, CAPACITY + 1) | st.integers(1, 2),
        protected=st.sets(NUMBERS, max_size=5) | st.sets(NUMBERS, max_size=1),
    )
    def evict(self, n: int, protected: set[int]) -> None:
        shielded = frozenset(keys(*protected))
        evictable = {k for k, block in self.held.items() if block.ref_cnt == 0 and k not in shielded}
        victims = self.policy.evict(n, shielded)
        if self.model is not None:
            expected = self.model.evict(n, shielded)
            assert (None if victims is None else [k for k, _ in victims]) == expected
        if len(evictable) < n:
            assert victims is None
            return
        assert victims is not None and len(victims) == n
        assert len({victim for victim, _ in victims}) == n
        for victim, block in victims:
            assert victim in evictable and self.held[victim] is block
            del self.held[victim]

    @rule(number=NUMBERS)
    def insert_a_held_key(self, number: int) -> None:
        if key(number) not in self.held:
            return
        with pytest.raises(ValueError, match="already held"):
            self.policy.insert(key(number), self.new_block(False))

    @precondition(lambda self: len(self.held) == CAPACITY)
    @rule(number=NUMBERS)
    def insert_into_a_full_policy(self, number: int) -> None:
        if key(number) in self.held:
            return
        with pytest.raises(ValueError, match="full"):
            self.policy.insert(key(number), self.new_block(False))

    @rule(
        numbers=st.lists(NUMBERS, min_size=1, max_size=4),
        fault=st.sampled_from(["repeated key", "held key", "too many", "lengths differ"]),
    )
    def insert_a_bad_batch(self, numbers: list[int], fault: str) -> None:
        new = [k for k in dict.fromkeys(keys(*numbers)) if k not in self.held]
        held = list(self.held)
        if fault == "repeated key" and new and len(self.held) + len(new) + 1 <= CAPACITY:
            batch, count, message = [*new, new[0]], len(new) + 1, "appears twice"
        elif fault == "held key" and held and len(self.held) + len(new) + 1 <= CAPACITY:
            batch, count, message = [*new, held[0]], len(new) + 1, "already held"
        elif fault == "too many" and len(self.held) + len(new) > CAPACITY:
            batch, count, message = new, len(new), "full"
        elif fault == "lengths differ" and new:
            batch, count, message = new, len(new) - 1, "one block per key"
        else:
            return
        with pytest.raises(ValueError, match=message):
            self.policy.insert_many(batch, [self.new_block(False) for _ in range(count)])

    @rule(n=st.integers(-3, -1))
    def evict_a_negative_count(self, n: int) -> None:
        with pytest.raises(ValueError, match="n must be >= 0"):
            self.policy.evict(n, frozenset())

    @invariant()
    def holds_what_the_model_holds(self) -> None:
        assert len(self.policy) == len(self.held) <= CAPACITY
        for k in ALL_KEYS:
            assert self.policy.get(k) is self.held.get(k)
        if self.model is not None:
            assert self.model.blocks == self.held


SETTINGS = stateful_settings(steps=STEPS, fast_examples=150)


@SETTINGS
class LRUMachine(PolicyMachine):
    policy_name = "lru"


@SETTINGS
class ARCMachine(PolicyMachine):
    policy_name = "arc"


@SETTINGS
class S3FIFOMachine(PolicyMachine):
    policy_name = "s3fifo"


@SETTINGS
class SIEVEMachine(PolicyMachine):
    policy_name = "sieve"


@SETTINGS
class PrefixReuseMachine(PolicyMachine):
    policy_name = "prefix_reuse"


assert {machine.policy_name for machine in PolicyMachine.__subclasses__()} == set(POLICY_NAMES)

TestLRU = LRUMachine.TestCase
TestARC = ARCMachine.TestCase
TestS3FIFO = S3FIFOMachine.TestCase
TestSIEVE = SIEVEMachine.TestCase
TestPrefixReuse = PrefixReuseMachine.TestCase
