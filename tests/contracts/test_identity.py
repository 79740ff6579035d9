"""The block identity: a fingerprint that stands for every field, the same in every process and Python."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcontract import BlockIdentity
from kvcontract.testing import example_identity

BASE = example_identity(4096)
PINNED = "d90d33969636f357debe03809678720d"
"""The fingerprint of ``BASE``: a change to it breaks every stored block, so it is a decision, not a refactor."""


def test_the_fingerprint_is_pinned_and_the_same_in_another_process() -> None:
    code = "from kvcontract.testing import example_identity; print(example_identity(4096).fingerprint_hex)"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert BASE.fingerprint_hex == other == PINNED
    assert len(BASE.fingerprint) == 16


CHANGES: dict[str, Callable[[BlockIdentity], BlockIdentity]] = {
    "model": lambda i: dataclasses.replace(i, model="other/model"),
    "revision": lambda i: dataclasses.replace(i, revision="v2"),
    "dtype": lambda i: dataclasses.replace(i, dtype="float16"),
    "num_layers": lambda i: dataclasses.replace(i, num_layers=2),
    "num_kv_heads": lambda i: dataclasses.replace(i, num_kv_heads=8),
    "head_dim": lambda i: dataclasses.replace(i, head_dim=64),
    "block_tokens": lambda i: dataclasses.replace(i, block_tokens=32),
    "offload_block_tokens": lambda i: dataclasses.replace(i, offload_block_tokens=64),
    "block_bytes": lambda i: dataclasses.replace(i, block_bytes=8192),
    "kv_quantization": lambda i: dataclasses.replace(i, kv_quantization="fp8"),
    "tp_size": lambda i: dataclasses.replace(i, tp_size=2),
    "pp_size": lambda i: dataclasses.replace(i, pp_size=2),
    "cp_size": lambda i: dataclasses.replace(i, cp_size=2),
    "hash_scheme": lambda i: dataclasses.replace(i, hash_scheme="vllm:sha256"),
    "namespace": lambda i: dataclasses.replace(i, namespace="tenant-a"),
    "layout_details": lambda i: dataclasses.replace(i, layout_details=(("host_layout", "page_first"),)),
}
"""One change of each field (the ranks have their own test)."""


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_every_field_changes_the_fingerprint(field: str) -> None:
    changed = CHANGES[field](BASE)
    assert changed != BASE and changed.fingerprint != BASE.fingerprint


def test_every_field_is_covered_by_a_change() -> None:
    names = {f.name for f in dataclasses.fields(BlockIdentity) if not f.name.startswith("_")}
    ranks = {"tp_rank", "pp_rank", "cp_rank"}
    assert names - ranks == set(CHANGES)


RANKS: dict[str, tuple[BlockIdentity, BlockIdentity]] = {
    "tp": (dataclasses.replace(BASE, tp_size=2), dataclasses.replace(BASE, tp_size=2, tp_rank=1)),
    "pp": (dataclasses.replace(BASE, pp_size=2), dataclasses.replace(BASE, pp_size=2, pp_rank=1)),
    "cp": (dataclasses.replace(BASE, cp_size=2), dataclasses.replace(BASE, cp_size=2, cp_rank=1)),
}


@pytest.mark.parametrize("axis", sorted(RANKS))
def test_one_rank_s_shard_is_not_another_s(axis: str) -> None:
    first, second = RANKS[axis]
    assert first.fingerprint != second.fingerprint


def test_layout_details_are_order_free() -> None:
    one = dataclasses.replace(BASE, layout_details=(("a", "1"), ("b", "2")))
    other = dataclasses.replace(BASE, layout_details=(("b", "2"), ("a", "1")))
    assert one == other and one.fingerprint == other.fingerprint
    assert one.as_dict()["layout_details"] == {"a": "1", "b": "2"}


@given(
    model=st.text(max_size=8),
    dtype=st.sampled_from(["float16", "bfloat16"]),
    layers=st.integers(1, 4),
    tp_size=st.integers(1, 3),
    data=st.data(),
)
def test_equal_fingerprints_exactly_for_equal_identities(
    model: str, dtype: str, layers: int, tp_size: int, data: st.DataObject
) -> None:
    tp_rank = data.draw(st.integers(0, tp_size - 1))
    drawn = dataclasses.replace(BASE, model=model, dtype=dtype, num_layers=layers, tp_size=tp_size, tp_rank=tp_rank)
    other = data.draw(st.sampled_from([BASE, drawn, dataclasses.replace(drawn, namespace="x")]))
    assert (drawn == other) == (drawn.fingerprint == other.fingerprint)


BAD: dict[str, tuple[Callable[[], BlockIdentity], str]] = {
    "num_layers": (lambda: dataclasses.replace(BASE, num_layers=0), "num_layers must be at least 1"),
    "block_bytes": (lambda: dataclasses.replace(BASE, block_bytes=0), "block_bytes must be at least 1"),
    "head_dim": (lambda: dataclasses.replace(BASE, head_dim=-1), "head_dim must be 0"),
    "tp_rank": (lambda: dataclasses.replace(BASE, tp_size=2, tp_rank=2), r"tp_rank must be in \[0, 2\)"),
    "pp_rank": (lambda: dataclasses.replace(BASE, pp_rank=-1), r"pp_rank must be in \[0, 1\)"),
}


@pytest.mark.parametrize("field", sorted(BAD))
def test_a_bad_field_is_one_error_naming_it(field: str) -> None:
    make, message = BAD[field]
    with pytest.raises(ValueError, match=message):
        make()
