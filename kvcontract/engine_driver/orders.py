"""The engine driver's two orders, the orders in which an engine's scheduler calls a manager for a request.

kvcontract's, :class:`RequestServer`: look up the longest readable prefix one key at a time, load it (``prepare_load``, the engine's copy, ``complete_load``), offer
the whole request to ``prepare_store`` (the manager skips what it holds and protects it),
``touch`` the request's keys (first key most recent), complete the store, finish the
request. Touching before ``complete_store`` lets policies tell a block stored just now from
one used again. vLLM's scheduler order, :class:`SchedulerOrderServer`: ``on_new_request``,
the same lookups, ``prepare_load`` of the prefix, ``prepare_store`` of the rest,
``complete_load``, ``complete_store``, ``on_request_finished`` and the step's end; vLLM's own
managers and kvcontract's vLLM adapter are driven that way.

The replay, the planner, the simulator and the benchmarks serve requests through these two,
so their figures measure the same thing; the simulator's copies and its deferred store
completions go through a :class:`DataPath`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Sized
from typing import Generic, NamedTuple, Protocol, TypeVar

from kvcontract.contracts import LookupResult
from kvcontract.enforce import unchecked

__all__ = ["DataPath", "RequestServer", "SchedulerOrderServer", "Served", "ServedManager", "StorePlan"]

_K = TypeVar("_K")
_C = TypeVar("_C")
_K_co = TypeVar("_K_co", covariant=True)
_K_contra = TypeVar("_K_contra", contravariant=True)
_C_contra = TypeVar("_C_contra", contravariant=True)
_RETRY_LIMIT = 2000
"""Times a ``RETRY`` is asked again before the key counts as a miss (with a data path only)."""


class StorePlan(Protocol[_K_co]):
    """What ``prepare_store`` chose: the keys to write and what it evicted (kvcontract's or vLLM's output)."""

    @property
    def keys_to_store(self) -> Sequence[_K_co]:
        """The keys the engine is to write, in the order the store spec gives their blocks."""
        ...

    @property
    def evicted_keys(self) -> Sized:
        """The keys evicted to make room."""
        ...


class ServedManager(Protocol[_K, _C_contra]):
    """The calls the driver makes: kvcontract's ``OffloadingManager`` has them, and so has vLLM's."""

    def lookup(self, key: _K, context: _C_contra, /) -> object:
        """Whether ``key`` is readable now."""
        ...

    def prepare_load(self, keys: Sequence[_K], context: _C_contra, /) -> object:
        """Pin ``keys`` for a load; the load's spec."""
        ...

    def complete_load(self, keys: Sequence[_K], context: _C_contra, /) -> object:
        """Unpin ``keys`` after their load."""
        ...

    def prepare_store(self, keys: Sequence[_K], context: _C_contra, /) -> StorePlan[_K] | None:
        """Choose what of ``keys`` to store, evicting for room; ``None`` when there is none."""
        ...

    def complete_store(self, keys: Sequence[_K], context: _C_contra, /) -> object:
        """Make the stored ``keys`` readable."""
        ...

    def on_request_finished(self, context: _C_contra, /) -> object:
        """The request is done."""
        ...


class DataPath(Protocol[_K_contra, _C_contra]):
    """What an engine does with the bytes between the manager's calls (the simulator's worker).

    With a data path, the driver waits for the promotions a tier started (``RETRY``) instead
    of counting them as misses, and the data path owns each store's completion.
    """

    def wait(self) -> None:
        """Pause briefly and take finished work before a ``RETRY`` is asked again."""
        ...

    def load(self, keys: Sequence[_K_contra], spec: object, context: _C_contra) -> None:
        """Copy the pinned ``keys`` in from the load ``spec``, between ``prepare_load`` and ``complete_load``."""
        ...

    def store(self, plan: StorePlan[_K_contra], context: _C_contra) -> None:
        """Write ``plan``'s keys; call the manager's ``complete_store`` when the copy has ended."""
        ...


class Served(NamedTuple):
    """What serving one request did: blocks found readable, blocks not stored for lack of room, evictions.

    A named tuple, not a frozen dataclass: one is made per request on the replay's hot path, and
    a tuple is made in a third of the time.
    """

    found: int
    failed: int
    evicted: int


_NOTHING = Served(0, 0, 0)


def _served(found: int, requested: int, output: StorePlan[object] | None) -> Served:
    """What a request of ``requested`` blocks got: ``found`` readable, the rest stored as ``output`` planned, or
    not stored at all when it found no room (``None``)."""
    if output is not None:
        return Served(found, 0, len(output.evicted_keys))
    return Served(found, requested - found, 0)


class RequestServer(Generic[_K, _C]):
    """Serves requests through one manager in kvcontract's order.

    The manager's bound methods are looked up once here, not per request: the replay of the
    shipped trace spends about 1 µs per request less that way. ``checked=False`` calls them
    without their runtime contract checks, for kvcontract's own callers whose calls the
    strict type-check gate proves (the what-if's shadows); an engine's calls stay checked.
    ``hit`` is the manager's readable answer (vLLM's managers have their own enum). The
    manager's ``touch`` is called when it has one (vLLM 0.34's managers have none);
    ``begin`` and ``step_end`` are called before and after each request (vLLM's
    ``on_new_request`` and a scheduler step's end); ``observe`` sees each request's keys first.
    """

    def __init__(
        self,
        manager: ServedManager[_K, _C],
        *,
        checked: bool = True,
        hit: object = LookupResult.HIT,
        begin: Callable[[_C], object] | None = None,
        step_end: Callable[[], object] | None = None,
        observe: Callable[[Sequence[_K]], object] | None = None,
        data_path: DataPath[_K, _C] | None = None,
    ) -> None:
        self._lookup = manager.lookup if checked else unchecked(manager.lookup)
        self._prepare_load = manager.prepare_load if checked else unchecked(manager.prepare_load)
        self._complete_load = manager.complete_load if checked else unchecked(manager.complete_load)
        self._prepare_store = manager.prepare_store if checked else unchecked(manager.prepare_store)
        self._complete_store = manager.complete_store if checked else unchecked(manager.complete_store)
        self._finished = manager.on_request_finished if checked else unchecked(manager.on_request_finished)
        touch: Callable[[Sequence[_K], _C], object] | None = getattr(manager, "touch", None)
        self._touch = touch if checked or touch is None else unchecked(touch)
        self._begin = begin
        self._hit = hit
        self._step_end = step_end
        self._observe = observe
        self._data_path = data_path

    def serve(self, keys: Sequence[_K], context: _C) -> Served:
        """Serve one request of ``keys`` (its prefix blocks, in order) under ``context``."""
        if self._observe is not None:
            self._observe(keys)
        if not keys:
            return _NOTHING
        if self._begin is not None:
            self._begin(context)
        data_path = self._data_path
        if data_path is None:
            lookup, hit = self._lookup, self._hit
            found = 0
            for key in keys:
                if lookup(key, context) is not hit:
                    break
                found += 1  # noqa: SIM113  # the hits before the first miss; enumerate() would need a for-else
        else:
            found = self._readable_prefix(keys, context, data_path)
        if found:
            prefix = keys[:found]
            spec = self._prepare_load(prefix, context)
            if data_path is not None:
                data_path.load(prefix, spec, context)
            self._complete_load(prefix, context)
        output = self._prepare_store(keys, context) if found < len(keys) else None
        if self._touch is not None:
            self._touch(keys, context)
        if output is not None:
            if data_path is None:
                self._complete_store(output.keys_to_store, context)
            elif output.keys_to_store:
                data_path.store(output, context)
        self._finished(context)
        if self._step_end is not None:
            self._step_end()
        return _served(found, len(keys), output)

    def _readable_prefix(self, keys: Sequence[_K], context: _C, data_path: DataPath[_K, _C]) -> int:
        """Blocks readable from the start of ``keys``, waiting for the promotions a tier started.

        Keys are looked up until one is neither readable nor being promoted, so every
        promotion of the prefix starts in the same step; then each ``RETRY`` is asked again,
        in order, until it lands. Finished work taken while waiting may have evicted part of
        the prefix, so after a wait it is looked up once more.
        """
        lookup, hit, retry = self._lookup, self._hit, LookupResult.RETRY
        answers: list[object] = []
        for key in keys:
            answer = lookup(key, context)
            if answer is not hit and answer is not retry:
                break
            answers.append(answer)
        found = 0
        for key, answer in zip(keys, answers):
            retries = 0
            while answer is retry and retries < _RETRY_LIMIT:
                data_path.wait()
                answer = lookup(key, context)
                retries += 1
            if answer is not hit:
                break
            found += 1
        if retry in answers:
            for count, key in enumerate(keys[:found]):
                if lookup(key, context) is not hit:
                    return count
        return found


class SchedulerOrderServer(Generic[_K, _C]):
    """Serves requests through one manager in vLLM's scheduler order (see the module's docstring).

    ``hit`` is the manager's readable answer; ``begin`` and ``step_end`` are called before and
    after each request (vLLM's ``on_new_request`` and ``on_schedule_end``: each request is one
    scheduler step here). ``after_load`` and ``after_store`` are called after ``prepare_load``
    (with the prefix) and after ``prepare_store`` (with the whole request), for a caller that
    mirrors what an adapter adds there (its ``touch`` calls).
    """

    def __init__(
        self,
        manager: ServedManager[_K, _C],
        *,
        hit: object = LookupResult.HIT,
        begin: Callable[[_C], object] | None = None,
        step_end: Callable[[], object] | None = None,
        after_load: Callable[[Sequence[_K], _C], object] | None = None,
        after_store: Callable[[Sequence[_K], _C], object] | None = None,
    ) -> None:
        self._lookup, self._hit = manager.lookup, hit
        self._prepare_load, self._complete_load = manager.prepare_load, manager.complete_load
        self._prepare_store, self._complete_store = manager.prepare_store, manager.complete_store
        self._finished = manager.on_request_finished
        self._begin, self._step_end = begin, step_end
        self._after_load, self._after_store = after_load, after_store

    def serve(self, keys: Sequence[_K], context: _C) -> Served:
        """Serve one request of ``keys`` (its prefix blocks, in order) under ``context``, as one step."""
        if self._begin is not None:
            self._begin(context)
        lookup, hit = self._lookup, self._hit
        found = 0
        for key in keys:
            if lookup(key, context) is not hit:
                break
            found += 1  # the hits before the first miss
        prefix = keys[:found]
        if found:
            self._prepare_load(prefix, context)
            if self._after_load is not None:
                self._after_load(prefix, context)
        output = self._prepare_store(keys[found:], context) if found < len(keys) else None
        if self._after_store is not None:
            self._after_store(keys, context)
        if found:
            self._complete_load(prefix, context)
        if output is not None:
            self._complete_store(output.keys_to_store, context)
        self._finished(context)
        if self._step_end is not None:
            self._step_end()
        return _served(found, len(keys), output)
