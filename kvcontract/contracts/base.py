"""The root of every contract: subclasses are checked by :mod:`kvcontract.enforce` when created."""

from __future__ import annotations

from typing import Any, Protocol

from typing_extensions import override

__all__ = ["Contract"]


class Contract(Protocol):
    """Marks a Protocol as a kvcontract contract.

    A class that inherits a contract has its overrides checked for ``@override`` and
    its contract methods wrapped with runtime call checks, at class creation.
    """

    @override
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        from kvcontract.enforce import enforce_class

        enforce_class(cls)
