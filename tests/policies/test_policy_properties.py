"""Every policy under random operation sequences, checked against a plain dict model after every step."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kvcontract import BlockStatus, CachePolicy
from kvcontract.policies import get_policy
from tests.policies.support import POLICY_NAMES, key, keys

CAPACITY = 6
NUMBERS = st.integers(0, 15)
ALL_KEYS = keys(*range(16))


class PolicyMachine(RuleBasedStateMachine):
    """Drives one policy; the model is the set of blocks it must hold, by key."""

    policy_name = "lru"

    def __init__(self) -> None:
        super().__init__()
        self.policy: CachePolicy = get_policy(self.policy_name)(CAPACITY)
        self.model: dict[bytes, BlockStatus] = {}
        self.next_id = 0

    @rule(number=NUMBERS, in_flight=st.booleans())
    def insert(self, number: int, in_flight: bool) -> None:
        if key(number) in self.model or len(self.model) >= CAPACITY:
            return
        block = BlockStatus(self.next_id, -1 if in_flight else 0)
        self.next_id += 1
        self.policy.insert(key(number), block)
        self.model[key(number)] = block

    @rule(numbers=st.lists(NUMBERS, max_size=4, unique=True), in_flight=st.booleans())
    def insert_many(self, numbers: list[int], in_flight: bool) -> None:
        new = [k for k in keys(*numbers) if k not in self.model]
        if len(self.model) + len(new) > CAPACITY:
            return
        blocks = [BlockStatus(self.next_id + i, -1 if in_flight else 0) for i in range(len(new))]
        self.next_id += len(new)
        self.policy.insert_many(new, blocks)
        self.model.update(zip(new, blocks))

    @rule(number=NUMBERS, change=st.sampled_from(["pin", "unpin", "complete"]), hint=st.booleans())
    def change_reference_count(self, number: int, change: str, hint: bool) -> None:
        block = self.model.get(key(number))
        if block is None:
            return
        if change == "pin" and block.ref_cnt >= 0:
            block.ref_cnt += 1
            if hint and block.ref_cnt == 1:
                self.policy.mark_non_evictable(key(number))
        elif (change == "unpin" and block.ref_cnt > 0) or (change == "complete" and block.ref_cnt == -1):
            block.ref_cnt = block.ref_cnt - 1 if change == "unpin" else 0
            if hint and block.ref_cnt == 0:
                self.policy.mark_evictable(key(number))

    @rule(numbers=st.lists(NUMBERS, max_size=8))
    def touch(self, numbers: list[int]) -> None:
        self.policy.touch(keys(*numbers))

    @rule(number=NUMBERS)
    def remove(self, number: int) -> None:
        self.policy.remove(key(number))
        self.model.pop(key(number), None)

    @rule(n=st.integers(0, CAPACITY + 1), protected=st.sets(NUMBERS, max_size=5))
    def evict(self, n: int, protected: set[int]) -> None:
        shielded = frozenset(keys(*protected))
        evictable = {k for k, block in self.model.items() if block.ref_cnt == 0 and k not in shielded}
        victims = self.policy.evict(n, shielded)
        if len(evictable) < n:
            assert victims is None
            return
        assert victims is not None and len(victims) == n
        assert len({victim for victim, _ in victims}) == n
        for victim, block in victims:
            assert victim in evictable and self.model[victim] is block
            del self.model[victim]

    @invariant()
    def holds_what_the_model_holds(self) -> None:
        assert len(self.policy) == len(self.model) <= CAPACITY
        for k in ALL_KEYS:
            assert self.policy.get(k) is self.model.get(k)


FAST = settings(max_examples=60, stateful_step_count=40, deadline=None)


@FAST
class LRUMachine(PolicyMachine):
    policy_name = "lru"


@FAST
class ARCMachine(PolicyMachine):
    policy_name = "arc"


@FAST
class S3FIFOMachine(PolicyMachine):
    policy_name = "s3fifo"


@FAST
class SIEVEMachine(PolicyMachine):
    policy_name = "sieve"


@FAST
class PrefixReuseMachine(PolicyMachine):
    policy_name = "prefix_reuse"


assert {machine.policy_name for machine in PolicyMachine.__subclasses__()} == set(POLICY_NAMES)

TestLRU = LRUMachine.TestCase
TestARC = ARCMachine.TestCase
TestS3FIFO = S3FIFOMachine.TestCase
TestSIEVE = SIEVEMachine.TestCase
TestPrefixReuse = PrefixReuseMachine.TestCase
