"""Offload keys: hash and group survive the round trip; bad groups are refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcontract import make_offload_key, offload_key_group, offload_key_hash


@given(st.binary(max_size=64), st.integers(min_value=0, max_value=2**32 - 1))
def test_key_round_trip(block_hash: bytes, group: int) -> None:
    key = make_offload_key(block_hash, group)
    assert offload_key_hash(key) == block_hash
    assert offload_key_group(key) == group
    assert key[-4:] == group.to_bytes(4, "big")


def test_default_group_is_zero() -> None:
    assert offload_key_group(make_offload_key(b"abc")) == 0


@pytest.mark.parametrize("group", [-1, 2**32])
def test_group_out_of_range_is_refused(group: int) -> None:
    with pytest.raises(ValueError, match="group_idx must be in"):
        make_offload_key(b"abc", group)
