"""The containers the kit passes where a contract says ``Sequence``, ``Iterable``, ``Collection`` or ``Set``.

A caller holds the contract, not the implementation: engines pass lists, but also tuples, sets
(vLLM's ``complete_store``) and generators where one pass is enough. So each keyed call of the
kit draws the container it passes: for a ``Sequence`` a list, a tuple or :class:`BareSequence`
(``__len__`` and ``__getitem__`` and nothing of its own); for an ``Iterable`` a list, a
:class:`OnePass` iterator or a set. A component that needs more than its contract gives (a
list method, ``len()`` of an iterator, a second pass) fails with the contract's rule for that
parameter, and hypothesis shrinks the container to a list whenever the failure does not depend
on it, so the rule it names is the one broken.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, TypeVar, overload

from hypothesis import strategies as st
from typing_extensions import override

from kvcontract.testing.conformance import RuleBroken

__all__ = [
    "BareSequence",
    "Form",
    "OnePass",
    "Param",
    "as_collection",
    "as_iterable",
    "as_sequence",
    "call_with",
    "collection_forms",
    "iterable_forms",
    "sequence_forms",
]

_T = TypeVar("_T")
_R = TypeVar("_R")


class BareSequence(Sequence[_T]):
    """A ``Sequence`` with nothing but what the ABC gives: ``len()``, indexing (slices too) and passes."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[_T]) -> None:
        self._items = tuple(items)

    @override
    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> _T: ...

    @overload
    def __getitem__(self, index: slice) -> BareSequence[_T]: ...

    @override
    def __getitem__(self, index: int | slice) -> _T | BareSequence[_T]:
        if isinstance(index, slice):
            return BareSequence(self._items[index])
        return self._items[index]

    @override
    def __repr__(self) -> str:
        return f"BareSequence({list(self._items)!r})"


class OnePass(Iterator[_T]):
    """A one-pass iterator that remembers being iterated again once spent (a second pass reads nothing)."""

    def __init__(self, items: Iterable[_T]) -> None:
        self._items = iter(tuple(items))
        self.spent: bool = False
        self.read_again: bool = False

    @override
    def __iter__(self) -> OnePass[_T]:
        if self.spent:
            self.read_again = True
        return self

    @override
    def __next__(self) -> _T:
        try:
            return next(self._items)
        except StopIteration:
            self.spent = True
            raise

    @override
    def __repr__(self) -> str:
        return "OnePass(...)"


class Form(Enum):
    """How the kit passes a container argument; its value names it in a failure."""

    LIST = "a list"
    TUPLE = "a tuple"
    BARE_SEQUENCE = "a BareSequence (len() and indexing only)"
    ONE_PASS = "a one-pass iterator"
    SET = "a set"

    @override
    def __repr__(self) -> str:
        return f"Form.{self.name}"


_MAKERS: dict[Form, Callable[[Iterable[Any]], Iterable[Any]]] = {
    Form.LIST: list,
    Form.TUPLE: tuple,
    Form.BARE_SEQUENCE: BareSequence,
    Form.ONE_PASS: OnePass,
    Form.SET: set,
}


def as_sequence(form: Form, items: Iterable[_T]) -> Sequence[_T]:
    """``items`` as a list, a tuple or a :class:`BareSequence`."""
    made = _MAKERS[form](items)
    assert isinstance(made, Sequence), f"{form!r} is not a Sequence"
    return made


def as_iterable(form: Form, items: Iterable[_T]) -> Iterable[_T]:
    """``items`` as a list, a :class:`OnePass` iterator or a set."""
    return _MAKERS[form](items)


def as_collection(form: Form, items: Iterable[_T]) -> Collection[_T]:
    """``items`` as a list, a tuple or a set."""
    made = _MAKERS[form](items)
    assert isinstance(made, Collection), f"{form!r} is not a Collection"
    return made


Kind = Literal["Sequence", "Iterable", "Collection"]

_RULES: dict[Kind, str] = {
    "Sequence": "`{name}` is a `Sequence`: len(), indexing and repeated passes, nothing more",
    "Iterable": "`{name}` is an `Iterable`: one pass, nothing more (no len(), no indexing, no second pass)",
    "Collection": "`{name}` is a `Collection`: len(), `in` and repeated passes, nothing more (no indexing)",
}

# Lists first: hypothesis shrinks toward the first choice, so a failure that lists also show is
# reported with a list and its own rule, and only one that needs another form names the form.
sequence_forms: st.SearchStrategy[Form] = st.sampled_from([Form.LIST, Form.TUPLE, Form.BARE_SEQUENCE])
"""The containers passed where a contract says ``Sequence``."""
iterable_forms: st.SearchStrategy[Form] = st.sampled_from([Form.LIST, Form.ONE_PASS, Form.SET])
"""The containers passed where a contract says ``Iterable`` (a set, as vLLM passes one)."""
collection_forms: st.SearchStrategy[Form] = st.sampled_from([Form.LIST, Form.TUPLE, Form.SET])
"""The containers passed where a contract says ``Collection``."""


@dataclass(frozen=True, slots=True)
class Param:
    """A container parameter of a contract method: where it is, what the contract types it as."""

    method: str
    name: str
    kind: Kind

    @property
    def rule(self) -> str:
        """The contract's rule for this parameter, in its words."""
        return _RULES[self.kind].format(name=self.name)


def call_with(
    param: Param,
    form: Form,
    argument: object,
    call: Callable[[], _R],
    expected: tuple[type[BaseException], ...] = (),
) -> _R:
    """``call()``, which passes ``argument`` (made in ``form``) as ``param``; raise the parameter's rule if the
    component needed more than the contract gives.

    An exception from a call with a list is the component's own (left to the other rules), as
    is one in ``expected`` (a refusal the rule under test asks for). Any other exception from a
    call with another form, or a second pass over a one-pass iterator, breaks ``param``'s rule.
    """
    try:
        result = call()
    except RuleBroken:  # another rule, which the call checked itself
        raise
    except expected:  # a refusal the rule under test asks for
        raise
    except Exception as error:
        if form is Form.LIST:
            raise
        raise RuleBroken(
            param.rule, f"{param.method} given {param.name} as {form.value} raised {type(error).__name__}: {error}"
        ) from error
    if isinstance(argument, OnePass) and argument.read_again:
        raise RuleBroken(
            param.rule, f"{param.method} iterated {param.name} a second time; a one-pass iterator is spent"
        )
    return result
