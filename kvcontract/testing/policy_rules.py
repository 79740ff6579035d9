"""The semantic contract of ``CachePolicy`` as a hypothesis state machine against a plain dict.

The machine calls the policy as a manager does (insert, touch, pin and unpin through
``ref_cnt``, with or without the ``mark_*`` hints, evict with a protected set) and checks
every answer against the model; with an order model (a reference policy) it also checks
that both choose the same victims.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kvcontract.contracts import BlockStatus, CachePolicy, OffloadKey, make_offload_key
from kvcontract.testing.conformance import refuses, require
from kvcontract.testing.containers import Form, Param, as_sequence, call_with, sequence_forms

__all__ = ["PolicyFactory", "policy_machine"]

PolicyFactory = Callable[[int], CachePolicy]
"""What ``check_policy`` is given: the policy's constructor, taking its capacity in blocks."""

_KEYS = 10
_key_numbers = st.integers(0, _KEYS - 1)
_TOUCH_KEYS = Param("CachePolicy.touch", "keys", "Sequence")
_INSERT_KEYS = Param("CachePolicy.insert_many", "keys", "Sequence")
_INSERT_BLOCKS = Param("CachePolicy.insert_many", "blocks", "Sequence")


def _key(number: int) -> OffloadKey:
    return make_offload_key(bytes([number]))


def policy_machine(factory: PolicyFactory, order_model: PolicyFactory | None) -> type[RuleBasedStateMachine]:
    """A state machine class that checks the policy ``factory`` builds."""

    class PolicyConformance(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.capacity = 1
            self.policy: CachePolicy = factory(1)
            self.order: CachePolicy | None = None
            self.blocks: dict[OffloadKey, BlockStatus] = {}

        @initialize(capacity=st.integers(1, 6), free=st.integers(0, 2))
        def create(self, capacity: int, free: int) -> None:
            # Start nearly full: an empty policy has no order to check and nothing to evict.
            self.capacity = capacity
            self.policy = factory(capacity)
            self.order = order_model(capacity) if order_model is not None else None
            for number in range(max(0, capacity - free)):
                self.insert(number, in_flight=False)

        def _unchanged(self, before: dict[OffloadKey, BlockStatus], rule_text: str) -> None:
            require(len(self.policy) == len(before), rule_text, f"len changed from {len(before)} to {len(self.policy)}")
            for key, block in before.items():
                require(self.policy.get(key) is block, rule_text, f"block {key.hex()} changed")

        @rule(number=_key_numbers, in_flight=st.booleans())
        def insert(self, number: int, in_flight: bool) -> None:
            key = _key(number)
            block = BlockStatus(number, -1 if in_flight else 0)
            if key in self.blocks or len(self.blocks) >= self.capacity:
                before = dict(self.blocks)
                refused = refuses(lambda: self.policy.insert(key, block), _REFUSALS)
                require(
                    refused, "an insert of a held key, or past capacity, is refused", f"insert {key.hex()} was accepted"
                )
                self._unchanged(before, "a refused insert changes nothing")
                return
            self.policy.insert(key, block)
            if self.order is not None:
                self.order.insert(key, block)
            self.blocks[key] = block

        @precondition(lambda self: len(self.blocks) < self.capacity)
        @rule()
        def fill(self) -> None:
            # As a manager stores after evicting: new blocks take the room, so the order has something to say.
            absent = [number for number in range(_KEYS) if _key(number) not in self.blocks]
            self.insert_many(absent[: self.capacity - len(self.blocks)], Form.LIST, Form.LIST)

        @rule(
            numbers=st.lists(_key_numbers, min_size=1, max_size=4, unique=True),
            keys_form=sequence_forms,
            blocks_form=sequence_forms,
        )
        def insert_many(self, numbers: list[int], keys_form: Form, blocks_form: Form) -> None:
            keys = as_sequence(keys_form, [_key(number) for number in numbers])
            blocks = as_sequence(blocks_form, [BlockStatus(number, 0) for number in numbers])

            def insert_many(expected: tuple[type[BaseException], ...] = ()) -> None:
                call_with(
                    _INSERT_KEYS,
                    keys_form,
                    keys,
                    lambda: call_with(
                        _INSERT_BLOCKS, blocks_form, blocks, lambda: self.policy.insert_many(keys, blocks), expected
                    ),
                    expected,
                )

            if any(key in self.blocks for key in keys) or len(self.blocks) + len(keys) > self.capacity:
                before = dict(self.blocks)
                refused = refuses(lambda: insert_many(_REFUSALS), _REFUSALS)
                require(refused, "insert_many of a held key, or past capacity, is refused", "it was accepted")
                self._unchanged(before, "a refused insert_many changes nothing (all or nothing)")
                return
            insert_many()
            if self.order is not None:
                self.order.insert_many(keys, blocks)
            self.blocks.update(zip(keys, blocks))

        @rule(number=_key_numbers)
        def remove(self, number: int) -> None:
            key = _key(number)
            self.policy.remove(key)
            if self.order is not None:
                self.order.remove(key)
            self.blocks.pop(key, None)
            require(self.policy.get(key) is None, "get after remove is None", f"get({key.hex()}) still answers")

        @rule(data=st.data(), form=sequence_forms)
        def touch(self, data: st.DataObject, form: Form) -> None:
            held = sorted(self.blocks)
            drawn = data.draw(st.lists(st.sampled_from(held), min_size=1, unique=True, max_size=4)) if held else []
            keys = as_sequence(form, drawn)
            call_with(_TOUCH_KEYS, form, keys, lambda: self.policy.touch(keys))
            if self.order is not None:
                self.order.touch(keys)

        @precondition(lambda self: self.order is not None and len(self.blocks) >= 2)
        @rule(form=sequence_forms)
        def touch_all_but_newest(self, form: Form) -> None:
            # Every block but the newest, oldest first: a policy that ranks by recency now evicts the
            # newest, one that ignores touch the oldest, so the next eviction tells them apart.
            keys = as_sequence(form, list(self.blocks)[:-1])
            call_with(_TOUCH_KEYS, form, keys, lambda: self.policy.touch(keys))
            if self.order is not None:
                self.order.touch(keys)

        @precondition(lambda self: any(block.ref_cnt >= 0 for block in self.blocks.values()))
        @rule(data=st.data(), hint=st.booleans())
        def pin(self, data: st.DataObject, hint: bool) -> None:
            ready = sorted(key for key, block in self.blocks.items() if block.ref_cnt >= 0)
            key = data.draw(st.sampled_from(ready))
            self.blocks[key].ref_cnt += 1
            if hint:
                self._hint(key, evictable=False)

        @precondition(lambda self: any(block.ref_cnt != 0 for block in self.blocks.values()))
        @rule(data=st.data(), hint=st.booleans())
        def unpin_or_land(self, data: st.DataObject, hint: bool) -> None:
            busy = sorted(key for key, block in self.blocks.items() if block.ref_cnt != 0)
            key = data.draw(st.sampled_from(busy))
            block = self.blocks[key]
            block.ref_cnt = 0 if block.ref_cnt == -1 else block.ref_cnt - 1
            if hint and block.ref_cnt == 0:
                self._hint(key, evictable=True)

        def _hint(self, key: OffloadKey, *, evictable: bool) -> None:
            for policy in (self.policy, self.order):
                if policy is not None:
                    (policy.mark_evictable if evictable else policy.mark_non_evictable)(key)

        def _protected_and_evictable(self, data: st.DataObject) -> tuple[frozenset[OffloadKey], int]:
            held = sorted(self.blocks)
            protected = (
                frozenset(data.draw(st.lists(st.sampled_from(held), unique=True, max_size=2)))
                if held
                else frozenset[OffloadKey]()
            )
            return protected, sum(1 for k, b in self.blocks.items() if k not in protected and b.ref_cnt == 0)

        @rule(data=st.data())
        def evict(self, data: st.DataObject) -> None:
            protected, evictable = self._protected_and_evictable(data)
            self._evict(data.draw(st.integers(0, evictable)), protected, evictable)

        @rule(data=st.data())
        def evict_one(self, data: st.DataObject) -> None:
            # One victim shows an order slip best, so it has a rule of its own.
            protected, evictable = self._protected_and_evictable(data)
            self._evict(min(1, evictable), protected, evictable)

        @rule(data=st.data())
        def evict_past_evictable(self, data: st.DataObject) -> None:
            protected, evictable = self._protected_and_evictable(data)
            self._evict(evictable + data.draw(st.integers(1, 2)), protected, evictable)

        def _evict(self, n: int, protected: frozenset[OffloadKey], evictable: int) -> None:
            before = dict(self.blocks)
            victims = self.policy.evict(n, protected)
            expected = self.order.evict(n, protected) if self.order is not None else None
            if victims is None:
                require(
                    n > evictable,
                    "evict returns n victims whenever n blocks are evictable",
                    f"evict({n}) gave None with {evictable} evictable",
                )
                self._unchanged(before, "evict that returns None changes nothing")
                return
            keys = [key for key, _ in victims]
            require(len(keys) == n, "evict returns exactly n victims", f"asked {n}, got {len(keys)}")
            require(len(set(keys)) == n, "evict's victims are distinct", f"victims {[k.hex() for k in keys]}")
            for key, block in victims:
                require(key in before, "evict returns only held blocks", f"{key.hex()} was not held")
                require(before[key] is block, "evict returns each victim with its own block", f"{key.hex()}")
                require(key not in protected, "evict never takes a protected block", f"took {key.hex()}")
                require(
                    block.ref_cnt == 0,
                    "evict never takes a pinned or in-flight block",
                    f"took {key.hex()} with ref_cnt {block.ref_cnt}",
                )
                require(self.policy.get(key) is None, "an evicted block is gone (get is None)", f"{key.hex()}")
                del self.blocks[key]
            if self.order is not None:
                want = sorted(key for key, _ in expected or [])
                require(
                    sorted(keys) == want,
                    "evict chooses the victims the order model chooses",
                    f"got {[k.hex() for k in keys]}, model {[k.hex() for k in want]}",
                )

        @rule(n=st.integers(-3, -1))
        def evict_negative(self, n: int) -> None:
            before = dict(self.blocks)
            require(
                refuses(lambda: self.policy.evict(n, frozenset()), _REFUSALS),
                "evict with n < 0 is refused",
                f"evict({n}) was accepted",
            )
            self._unchanged(before, "a refused evict changes nothing")

        @precondition(lambda self: bool(self.blocks))
        @rule()
        def clear(self) -> None:
            self.policy.clear()
            if self.order is not None:
                self.order.clear()
            gone = list(self.blocks)
            self.blocks.clear()
            require(len(self.policy) == 0, "clear drops every block", f"len is {len(self.policy)}")
            for key in gone:
                require(self.policy.get(key) is None, "clear drops every block", f"get({key.hex()}) still answers")

        @invariant()
        def consistent(self) -> None:
            require(
                len(self.policy) == len(self.blocks),
                "len counts the blocks held, in flight included",
                f"len {len(self.policy)}, held {len(self.blocks)}",
            )
            require(
                len(self.policy) <= self.capacity, "capacity is never exceeded", f"{len(self.policy)} > {self.capacity}"
            )
            for key, block in self.blocks.items():
                require(self.policy.get(key) is block, "get returns the block inserted for the key", f"{key.hex()}")

    return PolicyConformance


_REFUSALS = (ValueError, KeyError, TypeError)
"""What a policy may raise to refuse a call."""
