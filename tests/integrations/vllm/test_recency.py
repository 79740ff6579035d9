"""The recency the adapter commits for vLLM, which never calls ``touch``: every key so far, first position kept."""

from __future__ import annotations

from collections.abc import Sequence

from typing_extensions import override
from vllm.v1.kv_offload.base import ReqContext, make_offload_key

from kvcontract.contracts import OffloadKey
from kvcontract.contracts import ReqContext as ContractReqContext
from kvcontract.integrations.vllm import KVContractOffloadingManager
from kvcontract.managers import CPUOffloadingManager

KEYS = [make_offload_key(number.to_bytes(8, "big"), 0) for number in range(8)]


class RecordingManager(CPUOffloadingManager):
    """A CPU manager that records each touch."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.touched: list[list[bytes]] = []

    @override
    def touch(self, keys: Sequence[OffloadKey], req_context: ContractReqContext) -> None:
        self.touched.append([bytes(key) for key in keys])
        super().touch(keys, req_context)


def test_each_call_touches_every_key_so_far_and_a_repeated_key_keeps_its_first_position() -> None:
    inner = RecordingManager(8)
    manager = KVContractOffloadingManager(inner)
    first, other = ReqContext("first"), ReqContext("other")
    manager.on_new_request(first)
    manager.on_new_request(other)
    stored = manager.prepare_store(KEYS[:2], first)
    assert stored is not None
    manager.complete_store(stored.keys_to_store, first)
    assert manager.prepare_store([KEYS[2], KEYS[3]], first) is not None
    assert manager.prepare_store({KEYS[4]}, other) is not None  # another request between: its own keys only
    assert manager.prepare_store([KEYS[1], KEYS[5], KEYS[5]], first) is not None
    assert manager.prepare_store([KEYS[6]], first) is not None
    assert inner.touched == [
        KEYS[:2],
        KEYS[:4],
        [KEYS[4]],
        KEYS[:4] + [KEYS[5]],
        KEYS[:4] + [KEYS[5], KEYS[6]],
    ]
    manager.on_request_finished(first)
    manager.on_new_request(first)
    assert manager.prepare_store([KEYS[7]], first) is not None
    assert inner.touched[-1] == [KEYS[7]]  # a finished request's keys are forgotten
