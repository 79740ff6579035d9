"""The ``OffloadingEvent``s a tier keeps for ``take_events``, or none at all when nobody takes them.

Every tier reports the blocks it gained and lost the same way; a tier whose events are off
(``enable_events``, the default) keeps nothing, so an engine that never takes them (SGLang)
holds no event per stored block.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from kvcontract.contracts.keys import OffloadKey
from kvcontract.contracts.values import OffloadingEvent

__all__ = ["EventLog"]


class EventLog:
    """Events of one tier's ``medium`` since the last :meth:`take`; recorded from any thread."""

    def __init__(self, medium: str, *, enabled: bool) -> None:
        self._medium = medium
        self._events: list[OffloadingEvent] | None = [] if enabled else None
        self._lock = threading.Lock()

    def record(self, keys: Sequence[OffloadKey], *, removed: bool) -> None:
        """Keep the event that ``keys`` became readable (or were dropped, ``removed``), if events are on."""
        if self._events is not None:
            with self._lock:
                self._events.append(OffloadingEvent(keys, self._medium, removed=removed))

    def take(self) -> list[OffloadingEvent]:
        """The events since the last call, each once."""
        if not self._events:
            return []
        with self._lock:
            events, self._events = self._events, []
        return events
