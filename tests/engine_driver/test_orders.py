"""The engine driver's two orders: the calls each makes on a manager for one request, in order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kvcontract import LookupResult
from kvcontract.engine_driver.orders import RequestServer, SchedulerOrderServer, Served


@dataclass(frozen=True)
class Plan:
    """A store plan: the keys to write and those evicted for them."""

    keys_to_store: Sequence[int]
    evicted_keys: Sequence[int]


@dataclass
class Recorder:
    """A manager that holds ``held``, stores everything offered, and records each call."""

    held: set[int]
    calls: list[tuple[str, tuple[int, ...]]] = field(default_factory=list[tuple[str, tuple[int, ...]]])

    def lookup(self, key: int, context: str, /) -> LookupResult:
        self.calls.append(("lookup", (key,)))
        return LookupResult.HIT if key in self.held else LookupResult.MISS

    def prepare_load(self, keys: Sequence[int], context: str, /) -> None:
        self.calls.append(("prepare_load", tuple(keys)))

    def complete_load(self, keys: Sequence[int], context: str, /) -> None:
        self.calls.append(("complete_load", tuple(keys)))

    def prepare_store(self, keys: Sequence[int], context: str, /) -> Plan:
        self.calls.append(("prepare_store", tuple(keys)))
        return Plan([key for key in keys if key not in self.held], [])

    def touch(self, keys: Sequence[int], context: str, /) -> None:
        self.calls.append(("touch", tuple(keys)))

    def complete_store(self, keys: Sequence[int], context: str, /) -> None:
        self.calls.append(("complete_store", tuple(keys)))
        self.held.update(keys)

    def on_request_finished(self, context: str, /) -> None:
        self.calls.append(("finished", ()))


def test_kvcontracts_order_loads_the_prefix_then_offers_the_whole_request() -> None:
    manager = Recorder(held={1, 2})
    served = RequestServer[int, str](manager).serve([1, 2, 3], "request")
    assert served == Served(found=2, failed=0, evicted=0)
    assert manager.calls == [
        ("lookup", (1,)),
        ("lookup", (2,)),
        ("lookup", (3,)),
        ("prepare_load", (1, 2)),
        ("complete_load", (1, 2)),
        ("prepare_store", (1, 2, 3)),
        ("touch", (1, 2, 3)),
        ("complete_store", (3,)),
        ("finished", ()),
    ]


def test_vllms_order_offers_only_the_rest_and_completes_the_load_after_the_store_is_planned() -> None:
    manager = Recorder(held={1})
    steps: list[str] = []
    server = SchedulerOrderServer[int, str](
        manager, begin=lambda _: steps.append("begin"), step_end=lambda: steps.append("end")
    )
    assert server.serve([1, 2], "request") == Served(found=1, failed=0, evicted=0)
    assert manager.calls == [
        ("lookup", (1,)),
        ("lookup", (2,)),
        ("prepare_load", (1,)),
        ("prepare_store", (2,)),
        ("complete_load", (1,)),
        ("complete_store", (2,)),
        ("finished", ()),
    ]
    assert steps == ["begin", "end"]


def test_a_request_wholly_held_is_loaded_and_never_offered_for_store() -> None:
    manager = Recorder(held={1, 2})
    assert RequestServer[int, str](manager).serve([1, 2], "request") == Served(2, 0, 0)
    assert [name for name, _ in manager.calls if name.endswith("store")] == []
