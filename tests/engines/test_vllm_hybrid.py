"""A model whose layers are not all alike inside vLLM's engine: sliding-window layers between global ones.

vLLM keeps a KV-cache group per kind of layer (Gemma-2-shaped: sliding window of 64 tokens, then
full attention, alternating); kvcontract offloads and restores every group, and every token
equals the engine's own without offloading. vLLM offers a sliding-window group's blocks for
storing only where a later hit can need them (the window before each reuse boundary:
``prefix_cache_retention_interval``, 0 by default) and loads only those; kvcontract stores and
loads exactly what it is offered, one host pool for every group, so the window group takes only
the host blocks it stores. The engine records the bytes moved per group (``record_groups``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.engines.support import (
    BLOCK_SIZE,
    LOADED,
    STORED,
    EngineRun,
    GroupLedger,
    Pass,
    RunEngine,
    TinyModel,
    assert_exact_and_loaded,
    offload,
    shared_prefix_prompts,
)

WINDOW = 64
"""Tokens of the sliding window."""
PROMPTS = shared_prefix_prompts()
"""4 prefixes of 256 tokens, 4 prompts of 288 tokens each."""
REPLAY_BOUNDARY = (len(PROMPTS[0]) - 1) // BLOCK_SIZE * BLOCK_SIZE
"""Where vLLM's hit of a prompt can end (every prompt has 288 tokens): 256, the shared prefix."""
HOST_BLOCKS = 60
"""Host memory in offload blocks: what the first pass stores (48 full-attention blocks, 8 window
blocks) and a little room; divided evenly, each group would get 30, too few for the 48."""


def sliding_groups(ledger: GroupLedger, model: Path) -> set[int]:
    """The groups whose layers are sliding-window ones, by the model's ``layer_types``."""
    kinds = json.loads((model / "config.json").read_text())["layer_types"]
    index = re.compile(r"layers\.(\d+)\.")
    groups: set[int] = set()
    for group, layers in enumerate(ledger.layers):
        found = {kinds[int(match.group(1))] for layer in layers if (match := index.search(layer))}
        assert len(found) == 1, f"group {group} holds layers of kinds {found}"
        if found == {"sliding_attention"}:
            groups.add(group)
    return groups


def assert_only_the_window(ledger: GroupLedger, sliding: set[int]) -> None:
    """Every block a window group stored or loaded ends within the window before the reuse boundary."""
    for group in sliding:
        for what, ends in (("stored", ledger.stored_ends[group]), ("loaded", ledger.loaded_ends[group])):
            outside = sorted({end for end in ends if not REPLAY_BOUNDARY - WINDOW < end <= REPLAY_BOUNDARY})
            assert outside == [], f"group {group} {what} blocks ending at tokens {outside}, outside the window"


@pytest.fixture(scope="module")
def gemma2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return TinyModel(layers=4, sliding_window=WINDOW).save(tmp_path_factory.mktemp("gemma2"))


def test_a_sliding_window_model_offloads_and_restores_every_group_exactly(
    engine: RunEngine, without_offloading: Callable[[EngineRun], list[Pass]], gemma2: Path
) -> None:
    run = EngineRun(
        str(gemma2), offload(manager={"capacity": HOST_BLOCKS}), [PROMPTS, PROMPTS], gpu_blocks=128, record_groups=True
    )
    passes = engine(run)
    assert_exact_and_loaded(passes, without_offloading(run))
    first, second = passes
    ledger = second.ledger
    sliding = sliding_groups(ledger, gemma2)
    full = set(range(len(ledger.layers))) - sliding
    assert sliding and full
    # the bytes per group are the bytes vLLM counted
    assert sum(first.ledger.stored_bytes) == first.counter(STORED) == sum(ledger.stored_bytes)
    assert sum(ledger.loaded_bytes) == second.counter(LOADED)
    assert_only_the_window(ledger, sliding)
    for group in full:
        assert sorted(set(ledger.stored_ends[group])) == list(range(BLOCK_SIZE, len(PROMPTS[0]) + 1, BLOCK_SIZE))
    for group in sliding:
        assert 0 < ledger.stored_bytes[group] < min(ledger.stored_bytes[group] for group in full)
    # host memory shared by need: a size buys host blocks of one group's block (a key per block and
    # group), and every full-attention block of every prefix came back from its 60 blocks
    assert ledger.spec_block_bytes == max(ledger.block_bytes) == ledger.block_bytes[0]
    prefixes = len({tuple(prompt[:REPLAY_BOUNDARY]) for prompt in PROMPTS})
    for group in full:
        assert sorted(ledger.loaded_ends[group]) == sorted(
            list(range(BLOCK_SIZE, REPLAY_BOUNDARY + 1, BLOCK_SIZE)) * prefixes
        )


def test_a_window_stores_and_loads_less_than_full_attention_of_the_same_size(
    engine: RunEngine, gemma2: Path, tmp_path: Path
) -> None:
    """The Llama of the same size (4 layers, the same heads): one group of 4 layers, every block."""
    hybrid = EngineRun(
        str(gemma2), offload(manager={"capacity": "64MiB"}), [PROMPTS, PROMPTS], gpu_blocks=128, record_groups=True
    )
    llama = TinyModel(layers=4)
    full_run = EngineRun(
        str(llama.save(tmp_path / "llama")),
        offload(manager={"capacity": "64MiB"}),
        [PROMPTS, PROMPTS],
        gpu_blocks=128,
        record_groups=True,
    )
    windowed, everything = engine(hybrid)[-1].ledger, engine(full_run)[-1].ledger
    (full,) = set(range(len(windowed.layers))) - sliding_groups(windowed, gemma2)
    # the same blocks as the full-attention group, each holding twice its layers
    assert sorted(everything.stored_ends[0]) == sorted(windowed.stored_ends[full])
    assert everything.stored_bytes[0] == 2 * windowed.stored_bytes[full]
    # every block the full-attention group loaded, the model of full attention loaded too; it also
    # loads each prompt's last block, past the window group's boundary, which the hybrid recomputes
    assert Counter(windowed.loaded_ends[full]) <= Counter(everything.loaded_ends[0])
    assert sum(windowed.stored_bytes) < everything.stored_bytes[0]
    assert sum(windowed.loaded_bytes) < everything.loaded_bytes[0]


def test_control_told_every_block_is_needed_vllm_offers_blocks_outside_the_window_and_the_check_sees_them(
    engine: RunEngine, gemma2: Path
) -> None:
    """``prefix_cache_retention_interval=None`` keeps sliding-window checkpoints densely: every block."""
    run = EngineRun(
        str(gemma2),
        offload(manager={"capacity": "64MiB"}),
        [PROMPTS, PROMPTS],
        gpu_blocks=128,
        record_groups=True,
        engine_options={"prefix_cache_retention_interval": None},
    )
    ledger = engine(run)[-1].ledger
    with pytest.raises(AssertionError, match="outside the window"):
        assert_only_the_window(ledger, sliding_groups(ledger, gemma2))
