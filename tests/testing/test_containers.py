"""The containers the kit passes: a bare Sequence that is exactly a Sequence, a one-pass iterator that notices a second pass."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcontract.testing.conformance import RuleBroken
from kvcontract.testing.containers import BareSequence, Form, OnePass, Param, as_iterable, as_sequence, call_with

_PARAM = Param("CachePolicy.touch", "keys", "Sequence")


@given(
    items=st.lists(st.integers(0, 5), max_size=6),
    index=st.integers(-8, 8),
    start=st.integers(-8, 8),
    stop=st.integers(-8, 8),
)
def test_a_bare_sequence_answers_as_the_tuple_it_holds(items: list[int], index: int, start: int, stop: int) -> None:
    bare, model = BareSequence(items), tuple(items)
    assert isinstance(bare, Sequence)
    assert len(bare) == len(model)
    assert list(bare) == list(model) == list(bare)  # repeated passes
    assert list(reversed(bare)) == list(reversed(model))
    assert list(bare[start:stop]) == list(model[start:stop])
    assert (3 in bare) == (3 in model) and bare.count(3) == model.count(3)
    if -len(model) <= index < len(model):
        assert bare[index] == model[index]
    else:
        with pytest.raises(IndexError):
            bare[index]


def test_a_bare_sequence_has_nothing_of_a_list() -> None:
    bare = BareSequence([2, 1])
    for method in ("copy", "sort", "append", "__add__", "__eq__", "__hash__"):
        assert method not in vars(BareSequence), method
    with pytest.raises(AttributeError):
        getattr(bare, "sort")()
    with pytest.raises(TypeError):
        bare + [3]  # type: ignore[operator]  # pyright: ignore[reportOperatorIssue, reportUnusedExpression]  # the case under test


def test_a_one_pass_iterator_is_spent_after_one_pass_and_notes_a_second() -> None:
    once = OnePass([1, 2])
    assert list(once) == [1, 2]
    assert not once.read_again
    assert list(once) == []
    assert once.read_again
    partial = OnePass([1, 2, 3])
    first = next(iter(partial))
    assert [first, *partial] == [1, 2, 3]  # iter() again before it is spent is one pass, not a second
    assert not partial.read_again


def test_call_with_names_the_rule_only_for_a_form_other_than_a_list() -> None:
    def copy(keys: Sequence[int]) -> list[int]:
        return keys.copy()  # type: ignore[attr-defined, no-any-return]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownVariableType, reportUnknownMemberType]  # the case under test

    as_list, as_tuple = as_sequence(Form.LIST, [1]), as_sequence(Form.TUPLE, [1])
    assert call_with(_PARAM, Form.LIST, as_list, lambda: copy(as_list)) == [1]
    with pytest.raises(RuleBroken) as broken:
        call_with(_PARAM, Form.TUPLE, as_tuple, lambda: copy(as_tuple))
    assert broken.value.rule == "`keys` is a `Sequence`: len(), indexing and repeated passes, nothing more"
    assert broken.value.detail.startswith("CachePolicy.touch given keys as a tuple raised AttributeError")
    with pytest.raises(ValueError, match="refused"):
        call_with(_PARAM, Form.TUPLE, as_tuple, lambda: _refuse(), (ValueError,))


def test_call_with_catches_a_second_pass_over_a_one_pass_iterator() -> None:
    param = Param("OffloadingManager.complete_store", "keys", "Iterable")
    keys = as_iterable(Form.ONE_PASS, [1, 2])
    with pytest.raises(RuleBroken, match="iterated keys a second time"):
        call_with(param, Form.ONE_PASS, keys, lambda: (sum(keys), sum(keys)))


def _refuse() -> None:
    raise ValueError("refused")
