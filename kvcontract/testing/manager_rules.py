"""The semantic contract of ``OffloadingManager`` as a hypothesis state machine against a small model.

The model knows, per key, whether its store is in flight or readable, its block id and its
pins. The machine drives the manager as a scheduler does and checks lookups, the ids of loads
against those of stores, pins against eviction, failed stores, events, stats, and that a
refused call changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from typing_extensions import override

from kvcontract.contracts import (
    BlockIdsSpec,
    LookupResult,
    OffloadingManager,
    OffloadKey,
    ReqContext,
    make_offload_key,
)
from kvcontract.testing.conformance import refuses, require
from kvcontract.testing.containers import (
    Form,
    Param,
    as_iterable,
    as_sequence,
    call_with,
    iterable_forms,
    sequence_forms,
)

__all__ = ["ManagerFactory", "manager_machine"]

ManagerFactory = Callable[[int], OffloadingManager]
"""What ``check_manager`` is given: builds a manager with room for that many blocks."""

_KEYS = 10
_key_lists = st.lists(st.integers(0, _KEYS - 1), min_size=1, max_size=5, unique=True)
_PREPARE_STORE = Param("OffloadingManager.prepare_store", "keys", "Sequence")
_COMPLETE_STORE = Param("OffloadingManager.complete_store", "keys", "Iterable")
_PREPARE_LOAD = Param("OffloadingManager.prepare_load", "keys", "Sequence")
_COMPLETE_LOAD = Param("OffloadingManager.complete_load", "keys", "Iterable")
_TOUCH = Param("OffloadingManager.touch", "keys", "Sequence")


@dataclass
class _Block:
    block_id: int
    readable: bool = False
    pins: int = 0


def _key(number: int) -> OffloadKey:
    return make_offload_key(bytes([number]))


def _ids(spec: object) -> list[int]:
    require(isinstance(spec, BlockIdsSpec), "specs name host blocks (BlockIdsSpec)", f"got {type(spec).__name__}")
    assert isinstance(spec, BlockIdsSpec)
    return [int(block) for block in spec.block_ids]


def manager_machine(factory: ManagerFactory) -> type[RuleBasedStateMachine]:
    """A state machine class that checks the manager ``factory`` builds."""

    class ManagerConformance(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.capacity = 1
            self.manager: OffloadingManager = factory(1)
            self.blocks: dict[OffloadKey, _Block] = {}
            self.context = ReqContext("kit")

        @initialize(capacity=st.integers(1, 6))
        def create(self, capacity: int) -> None:
            self.manager.shutdown()
            self.capacity = capacity
            self.manager = factory(capacity)

        @override
        def teardown(self) -> None:
            self.manager.shutdown()

        def _answers(self) -> dict[OffloadKey, LookupResult]:
            return {_key(n): self.manager.lookup(_key(n), self.context) for n in range(_KEYS)}

        @rule(numbers=_key_lists, form=sequence_forms)
        def prepare_store(self, numbers: list[int], form: Form) -> None:
            keys = [_key(n) for n in numbers]
            before = self._answers()
            passed = as_sequence(form, keys)
            output = call_with(_PREPARE_STORE, form, passed, lambda: self.manager.prepare_store(passed, self.context))
            if output is None:
                require(
                    self._answers() == before, "a prepare_store that returns None changes nothing", "lookups changed"
                )
                return
            stored = list(output.keys_to_store)
            require(
                set(stored) <= set(keys), "prepare_store plans only keys of its batch", f"{[k.hex() for k in stored]}"
            )
            require(
                not any(k in self.blocks for k in stored),
                "prepare_store skips keys already stored or in flight",
                f"{[k.hex() for k in stored]}",
            )
            require(
                not set(output.evicted_keys) & set(keys),
                "prepare_store never evicts a key of its batch",
                f"{[k.hex() for k in output.evicted_keys]}",
            )
            for key in output.evicted_keys:
                block = self.blocks.get(key)
                require(block is not None and block.readable, "only readable blocks are evicted", f"{key.hex()}")
                require(
                    block is not None and block.pins == 0, "pins hold against eviction", f"evicted pinned {key.hex()}"
                )
                del self.blocks[key]
            ids = _ids(output.store_spec)
            require(
                len(ids) == len(stored),
                "the store spec has one block per key to store",
                f"{len(ids)} ids for {len(stored)} keys",
            )
            taken = {block.block_id for block in self.blocks.values()}
            require(
                len(set(ids)) == len(ids) and not set(ids) & taken,
                "a store never reuses a block another key holds",
                f"ids {ids}",
            )
            for key, block_id in zip(stored, ids):
                self.blocks[key] = _Block(block_id)
            require(
                len(self.blocks) <= self.capacity,
                "the manager never holds more than its capacity",
                f"{len(self.blocks)}",
            )

        @rule(numbers=_key_lists, success=st.booleans(), form=iterable_forms)
        def complete_store(self, numbers: list[int], success: bool, form: Form) -> None:
            keys = [_key(n) for n in numbers if _key(n) in self.blocks and not self.blocks[_key(n)].readable]
            if not keys:
                return
            passed = as_iterable(form, keys)
            call_with(_COMPLETE_STORE, form, passed, lambda: self.manager.complete_store(passed, self.context, success))
            for key in keys:
                if success:
                    self.blocks[key].readable = True
                else:
                    del self.blocks[key]

        @rule(numbers=_key_lists, form=sequence_forms)
        def load(self, numbers: list[int], form: Form) -> None:
            keys = [_key(n) for n in numbers if _key(n) in self.blocks and self.blocks[_key(n)].readable]
            if not keys:
                return
            passed = as_sequence(form, keys)
            ids = _ids(call_with(_PREPARE_LOAD, form, passed, lambda: self.manager.prepare_load(passed, self.context)))
            require(ids == [self.blocks[k].block_id for k in keys], "load ids equal store ids, in key order", f"{ids}")
            for key in keys:
                self.blocks[key].pins += 1

        @rule(numbers=_key_lists, form=iterable_forms)
        def complete_load(self, numbers: list[int], form: Form) -> None:
            keys = [_key(n) for n in numbers if _key(n) in self.blocks and self.blocks[_key(n)].pins]
            if keys:
                passed = as_iterable(form, keys)
                call_with(_COMPLETE_LOAD, form, passed, lambda: self.manager.complete_load(passed, self.context))
                for key in keys:
                    self.blocks[key].pins -= 1

        @rule(numbers=_key_lists, form=sequence_forms)
        def touch(self, numbers: list[int], form: Form) -> None:
            passed = as_sequence(form, [_key(n) for n in numbers])
            call_with(_TOUCH, form, passed, lambda: self.manager.touch(passed, self.context))

        @rule(numbers=_key_lists, form=sequence_forms)
        def load_unreadable(self, numbers: list[int], form: Form) -> None:
            keys = [_key(n) for n in numbers]
            if all(k in self.blocks and self.blocks[k].readable for k in keys):
                return
            passed = as_sequence(form, keys)
            self._refused(
                _PREPARE_LOAD,
                form,
                passed,
                lambda: self.manager.prepare_load(passed, self.context),
                "prepare_load of a block that is not readable is refused",
                keys,
            )

        @rule(numbers=_key_lists, form=iterable_forms)
        def complete_unpinned_load(self, numbers: list[int], form: Form) -> None:
            keys = [_key(n) for n in numbers]
            if all(k in self.blocks and self.blocks[k].pins for k in keys):
                return
            passed = as_iterable(form, keys)
            self._refused(
                _COMPLETE_LOAD,
                form,
                passed,
                lambda: self.manager.complete_load(passed, self.context),
                "complete_load of a block that is not being loaded is refused",
                keys,
            )

        def _refused(
            self,
            param: Param,
            form: Form,
            passed: object,
            call: Callable[[], object],
            rule: str,
            keys: list[OffloadKey],
        ) -> None:
            """``call`` (``passed`` as ``param``, in ``form``) must be refused with ``ValueError``, and change nothing."""
            before = self._answers()
            refused = refuses(lambda: call_with(param, form, passed, call, (ValueError,)), (ValueError,))
            require(refused, rule, f"{[k.hex() for k in keys]}")
            require(self._answers() == before, "a refused call changes nothing", "lookups changed")

        @rule()
        def take_events(self) -> None:
            for event in self.manager.take_events():
                for key in event.keys:
                    if not event.removed:
                        require(key in self.blocks, "a stored event names a block the manager holds", f"{key.hex()}")

        @invariant()
        def lookups_and_stats(self) -> None:
            for n in range(_KEYS):
                key = _key(n)
                block = self.blocks.get(key)
                answer = self.manager.lookup(key, self.context)
                if block is not None and block.readable:
                    require(
                        answer is LookupResult.HIT, "lookup answers HIT for a readable block", f"{key.hex()}: {answer}"
                    )
                else:
                    require(
                        answer is not LookupResult.HIT,
                        "lookup never answers HIT for a block that is not readable",
                        f"{key.hex()}",
                    )
            stats = self.manager.stats()
            require(stats.capacity == self.capacity, "stats report the capacity", f"{stats.capacity}")
            require(
                stats.used == len(self.blocks),
                "stats count the blocks held, in flight included",
                f"used {stats.used}, held {len(self.blocks)}",
            )

    return ManagerConformance
