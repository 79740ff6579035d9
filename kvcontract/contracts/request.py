"""The request a manager call is made for, and what a lookup can answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

__all__ = ["LookupResult", "ReqContext"]

_State = TypeVar("_State")


class LookupResult(Enum):
    """Answer of a lookup: whether a block can be loaded now."""

    MISS = "miss"
    """Not offloaded."""
    HIT = "hit"
    """Offloaded and readable."""
    HIT_PENDING = "hit_pending"
    """Offloaded, but its store is still in flight: not readable yet."""
    RETRY = "retry"
    """Unknown for now (a lower tier is promoting it): ask again on a later step."""


def _no_params() -> dict[str, object]:
    return {}


def _no_state() -> dict[type, object]:
    return {}


@dataclass(eq=False)
class ReqContext:
    """One request as the scheduler sees it, with typed state that managers may attach.

    State is keyed by its type, so independent managers stacked on one another
    each keep their own per-request object without name clashes. (The factories are plain
    functions: calling ``dict[str, object]`` goes through ``GenericAlias`` and made a
    context cost 1.8 µs instead of 0.4.)
    """

    req_id: str
    params: Mapping[str, object] = field(default_factory=_no_params)
    _state: dict[type, object] = field(default_factory=_no_state, repr=False)

    def get_state(self, cls: type[_State]) -> _State | None:
        """The state object of type ``cls`` attached to this request, if any."""
        value = self._state.get(cls)
        return value if isinstance(value, cls) else None

    def set_state(self, value: object) -> None:
        """Attach ``value`` to this request, replacing any state of the same type."""
        self._state[type(value)] = value
