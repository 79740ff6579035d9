"""Minimal contract implementations shared by the contract and enforcement tests."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from typing_extensions import ParamSpec, override

from kvcontract import (
    BlockIdsSpec,
    LookupResult,
    ManagerStats,
    OffloadingManager,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def logged(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """A wrapping decorator, as a downstream author might stack on a method."""

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return function(*args, **kwargs)

    return wrapper


class RecordingManager(OffloadingManager):
    """Stores every key it is asked to and records the calls it receives."""

    def __init__(self) -> None:
        self.stored: list[OffloadKey] = []
        self.calls: list[str] = []

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        self.calls.append("lookup")
        return LookupResult.HIT if key in self.stored else LookupResult.MISS

    @override
    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> BlockIdsSpec:
        return BlockIdsSpec([self.stored.index(k) for k in keys])

    @override
    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
        self.calls.append(f"touch:{len(keys)}")

    @override
    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        new = [k for k in keys if k not in self.stored]
        first = len(self.stored)
        return PrepareStoreOutput(new, BlockIdsSpec(range(first, first + len(new))), [])

    @override
    def complete_store(self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool = True) -> None:
        if success:
            self.stored.extend(keys)

    @override
    def stats(self) -> ManagerStats:
        return ManagerStats(capacity=1024, used=len(self.stored))

    @override
    def reset_cache(self) -> None:
        self.stored.clear()
