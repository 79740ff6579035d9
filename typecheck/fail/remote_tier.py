"""Remote tiers whose store hooks break those of :class:`kvcontract.tiers.remote_tier.RemoteTier`."""

from __future__ import annotations

from collections.abc import Sequence

from typing_extensions import override

from kvcontract import OffloadKey
from kvcontract.tiers.remote_tier import RemoteTier


class MissingHookOverride(RemoteTier):
    def _exists(self, keys: Sequence[OffloadKey]) -> Sequence[bool]:  # type: ignore[explicit-override]  # pyright: ignore[reportImplicitOverride]
        return [False] * len(keys)


class NarrowedHookParameter(RemoteTier):
    @override
    def _exists(self, keys: list[OffloadKey]) -> Sequence[bool]:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return [False] * len(keys)


class WrongClassification(RemoteTier):
    @override
    def _classify(self, error: BaseException) -> str:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        return "timeout"
