"""The base of manager decorators: every contract method goes on to the wrapped manager.

A decorator that inherited ``OffloadingManager`` directly would get the contract's default
bodies for its optional methods (``complete_load``, ``complete_store``,
``on_request_finished``, ``take_events``, ``shutdown``), which do nothing: one forgotten
override and a call is swallowed without a sound. ``ForwardingManager`` defines every
contract method as the same call on ``inner``, so a decorator overrides only what it
changes. ``tests/managers/test_forwarding.py`` reads the contract's methods from
``OffloadingManager`` itself, so a contract method added later fails that test until it
is forwarded here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from typing_extensions import override

from kvcontract.contracts import (
    LoadStoreSpec,
    LookupResult,
    ManagerStats,
    OffloadingEvent,
    OffloadingManager,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
)
from kvcontract.managers.evictions import EvictionListener, ReportsEvictions

__all__ = ["ForwardingManager"]

_REQUIRED = ("lookup", "prepare_load", "touch", "prepare_store", "stats", "reset_cache")
"""The contract methods without a default body: what ``inner`` must have to be a manager."""


class ForwardingManager(OffloadingManager):
    """Forwards every contract call, optional ones included, to ``inner``; subclasses override what they change.

    It also passes eviction listeners on to ``inner``
    (:class:`~kvcontract.managers.evictions.ReportsEvictions`), so a decorator between a
    tiering manager and a reuse filter hides none of the tiering manager's evictions.
    """

    def __init__(self, inner: OffloadingManager) -> None:
        missing = [name for name in _REQUIRED if not callable(getattr(inner, name, None))]
        if missing:
            raise ValueError(f"inner must be an OffloadingManager; {inner!r} lacks {', '.join(missing)}")
        self._inner = inner

    @property
    def inner(self) -> OffloadingManager:
        """The wrapped manager."""
        return self._inner

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        return self._inner.lookup(key, req_context)

    @override
    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> LoadStoreSpec:
        return self._inner.prepare_load(keys, req_context)

    @override
    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
        self._inner.touch(keys, req_context)

    @override
    def complete_load(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        self._inner.complete_load(keys, req_context)

    @override
    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        return self._inner.prepare_store(keys, req_context)

    @override
    def complete_store(self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool = True) -> None:
        self._inner.complete_store(keys, req_context, success)

    @override
    def on_request_finished(self, req_context: ReqContext) -> None:
        self._inner.on_request_finished(req_context)

    @override
    def take_events(self) -> list[OffloadingEvent]:
        return self._inner.take_events()

    @override
    def stats(self) -> ManagerStats:
        return self._inner.stats()

    @override
    def reset_cache(self) -> None:
        self._inner.reset_cache()

    @override
    def shutdown(self) -> None:
        self._inner.shutdown()

    def add_eviction_listener(self, listener: EvictionListener) -> None:
        """Pass ``listener`` on to ``inner`` if it evicts on its own; a decorator adds nothing by forwarding."""
        inner = self._inner
        if isinstance(inner, ReportsEvictions):
            inner.add_eviction_listener(listener)

    @override
    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._inner!r})"
