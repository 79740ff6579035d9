"""The root of every contract: a subclass is handed to the runtime enforcement when it is created.

The enforcement is imported here, plainly, and called from :meth:`Contract.__init_subclass__`:
no import registers anything, so a contract is checked whichever module was imported first.
The enforcement names this root rather than importing it (``enforcement/members.py``), so
the two form no import circle.
"""

from __future__ import annotations

from typing import Any, Protocol

from typing_extensions import override

from kvcontract.contracts.enforcement.classes import enforce_class

__all__ = ["Contract"]


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
        enforce_class(cls)
