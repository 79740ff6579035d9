"""kvcontract's offloading events as vLLM's, so ``take_events`` feeds vLLM's KV-event publishing.

kvcontract names a medium by a string (``"CPU"``, ``"FILE"``, a tier's own name); vLLM by
its ``Medium`` enum and a ``Locality``. Host memory is ``Medium.CPU``; every tier below it
is ``Medium.STORAGE``, local for the file tier and unknown (``None``) for the others.

A stored event says ``removal_expected``, as vLLM's own CPU manager does: kvcontract's
managers and tiers report every stored block again when they drop it, so vLLM keeps the
block's event payload until then. From vLLM 0.34 a stored event also carries the request
that stored it (``req_context``), from which vLLM's self-describing events
(``self_describing_kv_events``) build the block's tokens; vLLM 0.33 and 0.32 have no such field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vllm.v1.kv_offload.base import Locality, Medium
from vllm.v1.kv_offload.base import OffloadingEvent as VLLMOffloadingEvent
from vllm.v1.kv_offload.base import OffloadKey as VLLMOffloadKey
from vllm.v1.kv_offload.base import ReqContext as VLLMReqContext

from kvcontract.contracts import OffloadingEvent
from kvcontract.integrations.vllm.keys import as_vllm_keys
from kvcontract.integrations.vllm.releases import EVENTS_CARRY_REQUEST

__all__ = ["as_vllm_events"]

_MEDIA: dict[str, tuple[Medium, Locality | None]] = {
    "CPU": (Medium.CPU, Locality.LOCAL),
    "FILE": (Medium.STORAGE, Locality.LOCAL),
}

_NO_REQUESTS: Mapping[VLLMOffloadKey, VLLMReqContext] = {}


def as_vllm_events(
    events: Iterable[OffloadingEvent],
    *,
    ownership: str | None = None,
    stored_by: Mapping[VLLMOffloadKey, VLLMReqContext] = _NO_REQUESTS,
) -> list[VLLMOffloadingEvent]:
    """Each kvcontract event as one vLLM event; ``ownership`` names the secondary tier that made them,
    ``stored_by`` the request that stored a key (a stored event takes its first key's)."""
    converted: list[VLLMOffloadingEvent] = []
    for event in events:
        medium, locality = _MEDIA.get(event.medium, (Medium.STORAGE, None))
        keys = as_vllm_keys(event.keys)
        stored = not event.removed
        vllm_event = VLLMOffloadingEvent(
            keys=keys,
            medium=medium,
            removed=event.removed,
            locality=locality,
            ownership=ownership,
            removal_expected=stored,
        )
        if EVENTS_CARRY_REQUEST and stored and keys:
            vllm_event.req_context = stored_by.get(keys[0])
        converted.append(vllm_event)
    return converted
