"""vLLM's scheduler order: replaying a trace through a vLLM ``OffloadingManager`` as vLLM's scheduler calls it.

This is the engine driver's second named order (kvcontract's own is
:class:`kvcontract.engine_driver.orders.RequestServer`). Per request: ``on_new_request``; ``lookup`` one key at a time up to the first non-HIT;
``prepare_load`` of that prefix (pinned while the request runs); ``prepare_store`` of the
rest (the chunks the request computes); ``complete_load``; ``complete_store`` of what the
manager chose to store; ``on_request_finished``; ``on_schedule_end`` (each request is one
scheduler step here). There is no ``touch``: vLLM never calls it. Keys and contexts are
built before the clocks start, as in :func:`kvcontract.sim.replay`, whose report this
returns so the two compare directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import cast

from vllm.v1.kv_offload.base import LookupResult as VLLMLookupResult
from vllm.v1.kv_offload.base import OffloadingManager as VLLMOffloadingManager
from vllm.v1.kv_offload.base import OffloadKey as VLLMOffloadKey
from vllm.v1.kv_offload.base import ReqContext as VLLMReqContext
from vllm.v1.kv_offload.base import ScheduleEndContext

from kvcontract.engine_driver.keys import key_chains as driver_key_chains
from kvcontract.engine_driver.orders import SchedulerOrderServer
from kvcontract.sim.replay import ReplayReport, timed_replay

__all__ = ["key_chains", "replay_as_scheduler", "request_contexts"]


def key_chains(requests: Sequence[Sequence[int]]) -> list[list[VLLMOffloadKey]]:
    """Each request's keys from its hash ids, one key object per distinct id: :func:`kvcontract.engine_driver.keys.key_chains`."""
    return cast("list[list[VLLMOffloadKey]]", driver_key_chains(requests))  # same bytes in both OffloadKey NewTypes


def request_contexts(
    chains: Sequence[Sequence[VLLMOffloadKey]], *, block_tokens: int | None = None
) -> list[VLLMReqContext]:
    """vLLM's context of each request ``chains`` names, its ``req_id`` the request's number.

    With ``block_tokens``, each key's end-token position is recorded on its request's
    context (``set_offload_key_position``), as the scheduler does for vLLM's own managers,
    which rank a request's blocks by it; kvcontract's adapter does not read it.
    """
    contexts = [VLLMReqContext(req_id=str(number)) for number in range(len(chains))]
    if block_tokens is not None:
        for context, keys in zip(contexts, chains):
            for position, key in enumerate(keys, start=1):
                context.set_offload_key_position(key, position * block_tokens)
    return contexts


def replay_as_scheduler(
    manager: VLLMOffloadingManager, chains: Sequence[list[VLLMOffloadKey]], *, block_tokens: int | None = None
) -> ReplayReport:
    """Serve the requests ``chains`` names (keys per request) through ``manager`` as vLLM's scheduler would.

    ``block_tokens``: see :func:`request_contexts`.
    """
    contexts = request_contexts(chains, block_tokens=block_tokens)
    step_end = partial(manager.on_schedule_end, ScheduleEndContext(new_req_ids=(), preempted_req_ids=()))
    server = SchedulerOrderServer(manager, hit=VLLMLookupResult.HIT, begin=manager.on_new_request, step_end=step_end)
    return timed_replay(server.serve, chains, contexts)
