"""vLLM 0.33's ``test_cpu_manager`` sequence, ported: a failed ``prepare_store`` must not reorder LRU.

The scan of the failing ``prepare_store([6, 7, 8])`` meets blocks 2 and 3 pinned by a
load and parks them; once the load completes, they must return to the place their last
use gives them, so the next store evicts ``[2, 3, 4]`` (oldest first), as in vLLM.
kvcontract used to return them as most recent and evict ``[4, 5, 3]``. Block ids are
kvcontract's own (it reuses freed ids last-freed first, vLLM first-freed first).
"""

from __future__ import annotations

from kvcontract import LookupResult, OffloadKey, ReqContext
from kvcontract.managers import CPUOffloadingManager
from tests.policies.support import key, keys

CONTEXT = ReqContext("vllm-sequence")


def store(manager: CPUOffloadingManager, numbers: list[int]) -> tuple[list[OffloadKey], list[OffloadKey]] | None:
    """``prepare_store`` of ``numbers``: the keys it will store and the keys it evicted, or ``None``."""
    output = manager.prepare_store(keys(*numbers), CONTEXT)
    if output is None:
        return None
    return list(output.keys_to_store), list(output.evicted_keys)


def readable(manager: CPUOffloadingManager, number: int) -> bool:
    return manager.lookup(key(number), CONTEXT) is LookupResult.HIT


def test_the_lru_sequence_of_vllms_cpu_manager_test() -> None:
    manager = CPUOffloadingManager(4, "lru", enable_events=True)
    assert store(manager, [1, 2]) == (keys(1, 2), [])
    assert not readable(manager, 1) and not readable(manager, 2)
    assert manager.take_events() == []
    manager.complete_store(keys(1, 2), CONTEXT)
    assert [(sorted(e.keys), e.removed) for e in manager.take_events()] == [(sorted(keys(1, 2)), False)]
    assert readable(manager, 1) and readable(manager, 2) and not readable(manager, 3)

    assert store(manager, [2, 3, 4, 5]) == (keys(3, 4, 5), keys(1))
    assert store(manager, [1, 6]) is None
    manager.complete_store(keys(2, 3, 4, 5), CONTEXT)
    manager.prepare_load(keys(2, 3), CONTEXT)
    assert store(manager, [6, 7, 8]) is None
    manager.complete_load(keys(2, 3), CONTEXT)
    assert store(manager, [6, 7, 8]) == (keys(6, 7, 8), keys(2, 3, 4))

    manager.complete_store(keys(6, 7, 8), CONTEXT)
    manager.touch(keys(5, 6, 7), CONTEXT)
    assert store(manager, [9]) == (keys(9), keys(8))
    manager.complete_store(keys(7, 9), CONTEXT, success=False)
    assert readable(manager, 7) and not readable(manager, 9)
