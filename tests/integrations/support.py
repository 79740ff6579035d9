"""Helpers shared by the engine integrations' tests."""

from __future__ import annotations

import types
from collections.abc import Callable


def engine_methods(adapter: type) -> dict[str, Callable[..., object]]:
    """The public methods ``adapter``'s engine bases define, each from the nearest base: what it overrides."""
    methods: dict[str, Callable[..., object]] = {}
    for base in adapter.__mro__[1:]:
        for name, member in vars(base).items():
            function = getattr(member, "__func__", member)
            if isinstance(function, types.FunctionType) and not name.startswith("_"):
                methods.setdefault(name, function)
    return methods
