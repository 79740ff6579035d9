"""Evictions a manager makes on its own, outside every ``PrepareStoreOutput`` its caller sees.

A decorator that keeps state per stored key (the reuse filter's admitted keys) learns of
evictions from the outputs of the ``prepare_store`` calls it forwards. A manager that also
stores for itself, as the tiering manager does when it reserves primary blocks for a
promotion, evicts where no caller sees it; it reports those keys to every listener, as it
evicts them. A manager without ``add_eviction_listener`` makes no such evictions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from kvcontract.contracts import OffloadKey

__all__ = ["EvictionListener", "ReportsEvictions"]

EvictionListener = Callable[[Sequence[OffloadKey]], None]
"""Called with the keys of one eviction the manager made on its own."""


@runtime_checkable
class ReportsEvictions(Protocol):
    """A manager that can evict keys outside the ``prepare_store`` outputs its caller sees."""

    def add_eviction_listener(self, listener: EvictionListener) -> None:
        """Call ``listener`` with the keys of each such eviction, when it happens."""
        ...
