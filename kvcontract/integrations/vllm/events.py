"""kvcontract's offloading events as vLLM's, so ``take_events`` feeds vLLM's KV-event publishing.

kvcontract names a medium by a string (``"CPU"``, ``"FILE"``, a tier's own name); vLLM by
its ``Medium`` enum and a ``Locality``. Host memory is ``Medium.CPU``; every tier below it
is ``Medium.STORAGE``, local for the file tier and unknown (``None``) for the others.
"""

from __future__ import annotations

from collections.abc import Iterable

from vllm.v1.kv_offload.base import Locality, Medium
from vllm.v1.kv_offload.base import OffloadingEvent as VLLMOffloadingEvent

from kvcontract.contracts import OffloadingEvent
from kvcontract.integrations.vllm.keys import as_vllm_keys

__all__ = ["as_vllm_events"]

_MEDIA: dict[str, tuple[Medium, Locality | None]] = {
    "CPU": (Medium.CPU, Locality.LOCAL),
    "FILE": (Medium.STORAGE, Locality.LOCAL),
}


def as_vllm_events(events: Iterable[OffloadingEvent], *, ownership: str | None = None) -> list[VLLMOffloadingEvent]:
    """Each kvcontract event as one vLLM event; ``ownership`` names the secondary tier that made them."""
    converted: list[VLLMOffloadingEvent] = []
    for event in events:
        medium, locality = _MEDIA.get(event.medium, (Medium.STORAGE, None))
        converted.append(
            VLLMOffloadingEvent(
                keys=as_vllm_keys(event.keys),
                medium=medium,
                removed=event.removed,
                locality=locality,
                ownership=ownership,
            )
        )
    return converted
