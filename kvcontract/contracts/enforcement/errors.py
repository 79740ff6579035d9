"""The two errors of the contracts, the count of refused calls, and the wording of a refusal.

Both errors, and the violation classes the call checks make from them, say they come from
:mod:`kvcontract.enforce`, the module that exports them, so a traceback names the import a
user can write.
"""

from __future__ import annotations

import re
import threading
import types
from collections import abc
from collections.abc import Callable, Iterator, KeysView, Mapping, Set, ValuesView
from dataclasses import dataclass
from typing import ClassVar, Union, cast, get_args, get_origin

from beartype.door import is_bearable as _beartype_is_bearable
from beartype.roar import BeartypeCallHintParamViolation, BeartypeCallHintReturnViolation

__all__ = [
    "PUBLIC_MODULE",
    "CallSite",
    "ContractDefinitionError",
    "ContractHintWarning",
    "ContractViolation",
    "ParamViolation",
    "ReturnViolation",
    "contract_violations",
    "is_bearable",
    "short_type_name",
]

PUBLIC_MODULE = "kvcontract.enforce"
"""The module that exports the errors, named as theirs in tracebacks."""


class ContractDefinitionError(TypeError):
    """A class breaks a contract's definition rules (an override without ``@override``...)."""

    __module__ = PUBLIC_MODULE


class ContractViolation(TypeError):
    """A value breaks a contract's hints: a call passed or returned one it does not allow, or an override narrows them."""

    __module__ = PUBLIC_MODULE


class ContractHintWarning(UserWarning):
    """An override's hint that class creation could not resolve or compare with its contract's, so left unchecked."""

    __module__ = PUBLIC_MODULE


_violations = 0
_violations_lock = threading.Lock()


def contract_violations() -> int:
    """Contract calls refused with a :class:`ContractViolation` since the process started (for the metrics)."""
    return _violations


def _count_violation() -> None:
    global _violations
    with _violations_lock:
        _violations += 1


is_bearable: Callable[[object, object], bool] = cast(Callable[[object, object], bool], _beartype_is_bearable)
"""beartype's ``is_bearable`` for hints built at run time, which no checker can see as type forms."""


def short_type_name(hint: object) -> str:
    """A hint as a reader writes it: ``Sequence[OffloadKey]``, module paths left out."""
    # Python 3.10 counts a parameterized alias (Sequence[OffloadKey]) as a type: its repr names the items
    text = hint.__name__ if isinstance(hint, type) and get_origin(hint) is None else repr(hint)
    return re.sub(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)", r"\1", text)


def _received_name(value: object) -> str:
    kind = type(value)
    if isinstance(value, types.GeneratorType):
        return "generator"
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _received(value: object, hint: object) -> str:
    """What a caller passed, naming the first element that broke ``hint`` if it is a container.

    Runs only for a violation, so reading a re-iterable container through costs nothing on
    calls that pass.
    """
    name = _received_name(value)
    union = get_origin(hint) in (Union, types.UnionType)
    for container in get_args(hint) if union else (hint,):
        args = get_args(container)
        if (
            len(args) != 1
            or isinstance(value, (str, bytes))
            or not is_bearable(value, get_origin(container))
            or not is_bearable(value, abc.Collection)
        ):
            continue
        for index, element in enumerate(cast(abc.Collection[object], value)):
            if not is_bearable(element, args[0]):
                if isinstance(value, abc.Sequence):
                    return f"{name} whose element {index} is {_received_name(element)}"
                return f"{name} holding a {_received_name(element)}"
    return name


@dataclass(frozen=True)
class CallSite:
    """The contract method a wrapper checks, who implements it, and the hints it checks."""

    contract_method: str
    implementer: str
    annotations: Mapping[str, object]


class ParamViolation(ContractViolation):
    """Raised by beartype for a bad argument: rewords its message, keeps it as the cause."""

    site: ClassVar[CallSite]

    def __init__(self, message: str, culprits: tuple[object, ...] = ()) -> None:
        _count_violation()
        value = culprits[0] if culprits else None
        found = _PARAMETER_IN_MESSAGE.search(message)
        name = found.group(1) if found else "?"
        expected = short_type_name(self.site.annotations.get(name, object))
        super().__init__(
            f"{self.site.contract_method} called on {self.site.implementer}: parameter "
            f"{name!r} expects {expected}, "
            f"received {_received(value, self.site.annotations.get(name, object))}. "
            f"Fix: {_fix_for(expected, value)}"
        )
        self.__cause__: BaseException | None = BeartypeCallHintParamViolation(message=message, culprits=culprits)


class ReturnViolation(ContractViolation):
    """Raised by beartype for a bad return value: rewords its message, keeps it as the cause."""

    site: ClassVar[CallSite]

    def __init__(self, message: str, culprits: tuple[object, ...] = ()) -> None:
        _count_violation()
        hint = self.site.annotations["return"]
        received = _received(culprits[0], hint) if culprits else "a value of another type"
        expected = short_type_name(self.site.annotations["return"])
        super().__init__(
            f"{self.site.contract_method} implemented by {self.site.implementer} returned "
            f"{received}, expected {expected}. Fix: return what the contract declares."
        )
        self.__cause__: BaseException | None = BeartypeCallHintReturnViolation(message=message, culprits=culprits)


_PARAMETER_IN_MESSAGE = re.compile(r"parameter (\w+)=")


def _fix_for(expected: str, value: object) -> str:
    if expected.startswith("Sequence") and isinstance(value, _ONE_SHOT_OR_UNORDERED):
        return (
            "pass a list or tuple (for example list(...) at the call site): the contract "
            "types it as a Sequence because implementations may take len(), index it or "
            "iterate it twice."
        )
    return f"pass a value of type {expected}."


_ONE_SHOT_OR_UNORDERED: tuple[type[object], ...] = (Iterator, Set, KeysView, ValuesView)
"""What callers pass by mistake where a Sequence is due: one-shot iterators, sets, dict views."""
