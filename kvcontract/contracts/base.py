"""The root of every contract: subclasses are handed, when created, to the enforcer registered here.

``kvcontract.contracts`` registers :mod:`kvcontract.contracts.enforcement`'s enforcer when it
is imported, so this module imports nothing of the enforcement and the two form no circle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from typing_extensions import override

__all__ = ["Contract", "register_enforcer"]

_enforcer: Callable[[type], None] | None = None


def register_enforcer(enforcer: Callable[[type], None]) -> None:
    """Make ``enforcer`` process every class that inherits a contract, at its creation."""
    global _enforcer
    _enforcer = enforcer


class Contract(Protocol):
    """Marks a Protocol as a kvcontract contract.

    A class that inherits a contract has its overrides checked for ``@override`` and
    its contract methods wrapped with runtime call checks, at class creation.
    """

    @override
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_is_protocol", False):
            return  # a Protocol that extends a contract is a contract itself
        if _enforcer is None:
            raise RuntimeError(
                f"{cls.__module__}.{cls.__qualname__} inherits a kvcontract contract, but no "
                "enforcer is registered to check it: import kvcontract.contracts (which "
                "registers it) before defining implementations"
            )
        _enforcer(cls)
