"""The compiled copy loop: the same bytes as one slice assignment per run, and nothing moved on bad runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcontract.transfer.run_copy import CopyRuns, compiled_copy_runs
from tests.transfer.support import NEEDS_COMPILED_LOOP

SPAN = 256
INT32_COLUMN: Any = np.array([0], dtype=np.int32)

pytestmark = NEEDS_COMPILED_LOOP


def compiled() -> CopyRuns:
    """The compiled loop; the module's mark skips (or, required, fails) every test without it."""
    assert compiled_copy_runs is not None, "kvcontract's compiled copy loop was not built"
    return compiled_copy_runs


def column(values: list[int]) -> np.ndarray[tuple[int], np.dtype[np.int64]]:
    return np.array(values, dtype=np.int64)


runs = st.lists(
    st.integers(0, SPAN).flatmap(
        lambda size: st.tuples(st.integers(0, SPAN - size), st.integers(0, SPAN - size), st.just(size))
    ),
    max_size=12,
)


@given(start=st.binary(min_size=SPAN, max_size=SPAN), runs=runs)
def test_runs_are_copied_in_order_as_slice_assignments_would(start: bytes, runs: list[tuple[int, int, int]]) -> None:
    copy_runs = compiled()
    expected, actual = bytearray(start), bytearray(start)
    for dst, src, size in runs:
        expected[dst : dst + size] = expected[src : src + size]
    copy_runs(
        memoryview(actual),
        column([r[0] for r in runs]),
        column([r[1] for r in runs]),
        column([r[2] for r in runs]),
    )
    assert actual == expected


@pytest.mark.parametrize(
    ("dst", "src", "size"),
    [(SPAN - 3, 0, 4), (0, SPAN - 3, 4), (-1, 0, 1), (0, -8, 8), (0, 0, -1), (0, 0, SPAN + 1)],
)
def test_a_run_outside_the_span_raises_before_any_byte_moves(dst: int, src: int, size: int) -> None:
    copy_runs = compiled()
    span = bytearray(range(SPAN))
    with pytest.raises(ValueError, match=r"copy_runs: run 1 .* leaves the span of 256 bytes; no byte was copied"):
        copy_runs(memoryview(span), column([8, dst]), column([0, src]), column([4, size]))
    assert span == bytearray(range(SPAN))


def test_columns_of_another_type_or_length_are_refused() -> None:
    copy_runs = compiled()
    span = memoryview(bytearray(SPAN))
    with pytest.raises(TypeError, match="src must be a one-dimensional int64 array"):
        copy_runs(span, column([0]), INT32_COLUMN, column([1]))
    with pytest.raises(ValueError, match="one entry per run, got 2, 1 and 1"):
        copy_runs(span, column([0, 1]), column([0]), column([1]))
    with pytest.raises(BufferError):
        copy_runs(memoryview(bytes(SPAN)), column([0]), column([0]), column([1]))
