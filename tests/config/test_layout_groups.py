"""``kv_layout.groups``: a hybrid model's groups, their bytes, what each keeps of a request, and the errors."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcontract.config import ConfigError, KVLayout, load_config
from kvcontract.config.layout_groups import FullAttentionGroup, RecurrentStateGroup, SlidingWindowGroup

GEMMA = {
    "num_layers": 4,
    "block_tokens": 32,
    "offload_block_tokens": 32,
    "num_kv_heads": 1,
    "head_dim": 64,
    "dtype": "float32",
}
"""The real-engine test's Gemma-2-shaped model: 2 window layers of 64 tokens, 2 full-attention ones."""
WINDOWED = {
    **GEMMA,
    "groups": [
        {"kind": "full_attention", "num_layers": 2},
        {"kind": "sliding_window", "num_layers": 2, "window_tokens": 64},
    ],
}


def test_a_host_block_holds_one_group_block_the_largest() -> None:
    full, windowed = KVLayout.model_validate(GEMMA), KVLayout.model_validate(WINDOWED)
    assert full.offload_block_bytes == 65_536
    assert windowed.offload_block_bytes == 32_768  # 2 layers: the bytes vLLM moves per block and group
    state = KVLayout.model_validate(
        {
            **GEMMA,
            "groups": [
                {"kind": "full_attention", "num_layers": 3},
                {"kind": "recurrent_state", "num_layers": 1, "state_bytes": "1MiB"},
            ],
        }
    )
    assert state.offload_block_bytes == 2**20


def test_each_group_keeps_what_vllm_offers_of_a_request() -> None:
    assert FullAttentionGroup(num_layers=1).kept_blocks(9, 32) == 9
    assert SlidingWindowGroup(num_layers=1, window_tokens=64).kept_blocks(9, 32) == 2  # the blocks of 63 tokens
    assert SlidingWindowGroup(num_layers=1, window_tokens=4096).kept_blocks(9, 32) == 9
    assert SlidingWindowGroup(num_layers=1, window_tokens=1).kept_blocks(9, 32) == 1
    assert RecurrentStateGroup(num_layers=1, state_bytes=8).kept_blocks(9, 32) == 1


def test_grouped_requests_match_what_the_engine_stored() -> None:
    """The real engine's first pass (tests/engines/test_vllm_hybrid.py): 4 prefixes of 8 blocks, 16 prompts of 9."""
    prefixes = [[100 * p + b for b in range(8)] for p in range(4)]
    requests = [prefix + [1000 + 10 * p + s] for p, prefix in enumerate(prefixes) for s in range(4)]
    grouped = KVLayout.model_validate(WINDOWED).grouped_requests(requests)
    unique = {key for keys in grouped for key in keys}
    # every block for full attention (48: 32 of the prefixes, 16 last ones), and for the window the
    # last 2 of each request (its boundary is its end; the engine's is the shared prefix's, 8 blocks)
    assert len({key for keys in requests for key in keys}) == 48
    assert len(unique) == 48 + 4 + 16


def reference(requests: Sequence[Sequence[int]], kept: Sequence[int]) -> list[set[tuple[int, int]]]:
    """Per request, the (hash id, group) pairs kept: a group's last ``kept[g]`` blocks."""
    return [
        {(h, g) for g, n in enumerate(kept) for h in hash_ids[len(hash_ids) - min(n, len(hash_ids)) :]}
        for hash_ids in requests
    ]


@given(
    requests=st.lists(st.lists(st.integers(0, 30), min_size=1, max_size=12, unique=True), min_size=1, max_size=12),
    window=st.integers(1, 300),
)
def test_every_block_and_group_gets_one_key_of_its_own(requests: list[list[int]], window: int) -> None:
    layout = KVLayout.model_validate(
        {
            **GEMMA,
            "groups": [
                {"kind": "full_attention", "num_layers": 2},
                {"kind": "sliding_window", "num_layers": 1, "window_tokens": window},
                {"kind": "recurrent_state", "num_layers": 1, "state_bytes": 64},
            ],
        }
    )
    kept = [group.kept_blocks(1 << 30, 32) for group in layout.groups or ()]
    grouped = layout.grouped_requests(requests)
    names: dict[tuple[int, int], int] = {}
    for pairs, keys in zip(reference(requests, kept), grouped, strict=True):
        assert len(keys) == len(set(keys)) == len(pairs)
        ordered = sorted(pairs, key=lambda pair: pair[1])
        for pair in ordered:
            names.setdefault(pair, len(names))
    # one key per (hash id, group), the same in every request: as many distinct keys as distinct pairs
    assert len({key for keys in grouped for key in keys}) == len(names)
    assert all(
        key in hash_ids or key > max(max(r) for r in requests)
        for hash_ids, keys in zip(requests, grouped)
        for key in keys
    )


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        (
            [{"kind": "full_attention", "num_layers": 3}],
            "kv_layout: groups: their num_layers add up to 3 (3), but num_layers is 4",
        ),
        (
            [{"kind": "sliding", "num_layers": 4}],
            "kv_layout.groups.0: Input tag 'sliding' found using 'kind' does not match",
        ),
        (
            [{"kind": "sliding_window", "num_layers": 4}],
            "kv_layout.groups.0.sliding_window.window_tokens: Field required",
        ),
        (
            [{"kind": "recurrent_state", "num_layers": 4, "state_bytes": 12}],
            "groups.0.state_bytes: 12 bytes; the copy engines move whole 8-byte words",
        ),
        (
            [{"kind": "recurrent_state", "num_layers": 4, "state_bytes": "lots"}],
            "kv_layout.groups.0.recurrent_state.state_bytes",
        ),
        ([], "kv_layout.groups: Tuple should have at least 1 item"),
    ],
)
def test_a_bad_group_is_refused_naming_its_field(groups: list[object], expected: str, tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"kv_layout": {**GEMMA, "groups": groups}}))
    with pytest.raises(ConfigError) as raised:
        load_config(path, environ={})
    assert expected in str(raised.value)
