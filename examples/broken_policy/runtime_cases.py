"""Each function trips one runtime check of kvcontract and lets its exception out."""

from __future__ import annotations

from collections.abc import Sequence

from typing_extensions import override

from kvcontract import BlockStatus, CachePolicy, LookupResult, OffloadKey, ReqContext, make_offload_key
from kvcontract.managers import CPUOffloadingManager
from kvcontract.policies import LRUPolicy

KEYS = [make_offload_key(bytes([i]) * 8) for i in range(3)]


def define_policy_without_override() -> type:
    """Class creation fails: ``touch`` overrides ``CachePolicy.touch`` without ``@override``."""

    class ForgetfulPolicy(CachePolicy):
        @override
        def get(self, key: OffloadKey) -> BlockStatus | None:
            return None

        def touch(self, keys: Sequence[OffloadKey]) -> None:
            return None

    return ForgetfulPolicy


def define_policy_with_narrowed_touch() -> type:
    """Class creation fails: ``touch`` takes a ``list`` where ``CachePolicy.touch`` says ``Sequence``."""

    class SortingPolicy(LRUPolicy):
        @override
        def touch(self, keys: list[OffloadKey]) -> None:
            keys.sort()
            super().touch(keys)

    return SortingPolicy


def generator_to_prepare_store() -> None:
    """A generator where ``prepare_store`` takes a Sequence."""
    CPUOffloadingManager(4).prepare_store((k for k in KEYS), ReqContext("r"))


def set_to_touch() -> None:
    """A set where ``touch`` takes a Sequence."""
    CPUOffloadingManager(4).touch(set(KEYS), ReqContext("r"))


def dict_view_to_prepare_load() -> None:
    """A dict view where ``prepare_load`` takes a Sequence."""
    CPUOffloadingManager(4).prepare_load(dict.fromkeys(KEYS).keys(), ReqContext("r"))


class LyingManager(CPUOffloadingManager):
    """Returns a string from ``lookup``."""

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        return "hit"


def bad_return_from_lookup() -> None:
    """``lookup`` returns something that is not a LookupResult."""
    LyingManager(4).lookup(KEYS[0], ReqContext("r"))
