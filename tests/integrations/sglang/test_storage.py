"""KVContractHiCacheStorage on SGLang's real host pools and backend factory: the contract SGLang relies on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from kvcontract.config import ConfigError
from kvcontract.integrations.sglang import UnsupportedSGLangError, check_sglang_version
from kvcontract.metrics import MetricsCollector
from kvcontract.tiers import FileTier
from tests.integrations.sglang.support import (
    MHA_LAYOUTS,
    MLA_LAYOUTS,
    PAGE,
    backend,
    fill_random,
    fill_split_random,
    keys_for,
    mha_pool,
    mla_pool,
    mla_split_pool,
    page_bytes,
    split_page_bytes,
    storage_config,
)

ZERO_COPY = {"layer_first": False, "page_first": True, "page_first_direct": True, "page_head": True}


def _stored(
    pool: Any, root: Path, layout: str, *, mla: bool = False, pages: int = 3, name: str = "req"
) -> tuple[Any, list[str], torch.Tensor, list[bytes]]:
    store = backend(pool, storage_config(root, layout=layout, mla=mla))
    indices = pool.alloc(pages * PAGE)
    fill_random(pool, seed=7)
    keys = keys_for(name, pages)
    expected = [page_bytes(pool, int(indices[i * PAGE])) for i in range(pages)]
    assert store.batch_set_v1(keys, indices) == [True] * pages
    return store, keys, indices, expected


@pytest.mark.parametrize("layout", MHA_LAYOUTS)
def test_pages_round_trip_byte_exact_on_every_mha_layout(tmp_path: Path, layout: str) -> None:
    pool = mha_pool(layout)
    store, keys, indices, expected = _stored(pool, tmp_path, layout)
    assert store.zero_copy is ZERO_COPY[layout]
    pool.kv_buffer.zero_()
    assert store.batch_get_v1(keys, indices) == [True, True, True]
    assert [page_bytes(pool, int(indices[i * PAGE])) for i in range(3)] == expected


@pytest.mark.parametrize("layout", MLA_LAYOUTS)
def test_mla_pages_round_trip_and_one_writer(tmp_path: Path, layout: str) -> None:
    pool = mla_pool(layout)
    store, keys, _, expected = _stored(pool, tmp_path, layout, mla=True)
    assert store.zero_copy is ZERO_COPY[layout]
    reader_pool = mla_pool(layout)
    reader = backend(reader_pool, storage_config(tmp_path, layout=layout, mla=True, tp_rank=1, tp_size=2))
    assert reader.batch_set_v1(keys_for("other", 1), reader_pool.alloc(PAGE)) == [
        True
    ]  # not the writer: stores nothing
    assert reader.batch_exists(keys_for("other", 1)) == 0
    targets = reader_pool.alloc(3 * PAGE)
    assert reader.batch_exists(keys) == 3  # MLA's KV is every rank's: rank 1 reads rank 0's pages
    assert reader.batch_get_v1(keys, targets) == [True] * 3
    assert [page_bytes(reader_pool, int(targets[i * PAGE])) for i in range(3)] == expected


def test_batch_exists_counts_hits_up_to_the_first_miss(tmp_path: Path) -> None:
    pool = mha_pool("page_first")
    store, keys, _, _ = _stored(pool, tmp_path, "page_first")
    missing = keys_for("missing", 1)
    assert store.batch_exists(keys) == 3
    assert store.batch_exists(keys[:2] + missing + keys[2:]) == 2
    assert store.batch_exists(missing + keys) == 0
    assert store.exists(keys[0]) and not store.exists(missing[0])


def test_batch_set_v1_says_true_only_once_the_page_is_in_the_tier(tmp_path: Path) -> None:
    pool = mha_pool("page_first")
    store, keys, _, _ = _stored(pool, tmp_path, "page_first")
    files = [path for path in tmp_path.rglob("*") if path.is_file() and not path.name.startswith(".")]
    assert len(files) >= 2 * len(keys)  # two regions (K, V) per page, each a block file, renamed into place
    assert store.batch_exists(keys) == len(keys)


@pytest.mark.parametrize("layout", ["page_first", "layer_first"])
def test_a_load_writes_no_byte_outside_the_host_indices_it_was_given(tmp_path: Path, layout: str) -> None:
    pool = mha_pool(layout)
    store, keys, indices, _ = _stored(pool, tmp_path, layout)
    fill_random(pool, seed=11)
    before = pool.kv_buffer.clone()
    targets = indices[PAGE : 2 * PAGE]
    assert store.batch_get_v1(keys[1:2], targets) == [True]
    changed = (before.view(torch.uint8) != pool.kv_buffer.view(torch.uint8)).nonzero()
    token_axis = {"layer_first": 2, "page_first": 1}[layout]
    assert changed.numel() and set(changed[:, token_axis].tolist()) <= set(targets.numpy().tolist())


def test_a_backend_attached_to_a_tier_holding_pages_finds_them_at_once(tmp_path: Path) -> None:
    pool = mha_pool("page_first")
    store, keys, _, expected = _stored(pool, tmp_path, "page_first")
    store.close()
    again_pool = mha_pool("page_first")
    again = backend(again_pool, storage_config(tmp_path))
    targets = again_pool.alloc(3 * PAGE)
    assert again.batch_exists(keys) == 3
    assert again.batch_get_v1(keys, targets) == [True] * 3
    assert [page_bytes(again_pool, int(targets[i * PAGE])) for i in range(3)] == expected


_OTHER_PROCESS = """
import sys
from pathlib import Path
from tests.integrations.sglang.support import PAGE, backend, fill_random, keys_for, mha_pool, page_bytes, storage_config
pool = mha_pool("page_first")
store = backend(pool, storage_config(Path(sys.argv[1])))
indices = pool.alloc(2 * PAGE)
fill_random(pool, seed=5)
assert store.batch_set_v1(keys_for("shared", 2), indices) == [True, True]
sys.stdout.write("".join(page_bytes(pool, int(indices[i * PAGE])).hex() + "\\n" for i in range(2)))
store.close()
"""


def test_a_second_instance_in_another_process_gets_the_first_ones_pages_byte_exact(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    written = subprocess.run(
        [sys.executable, "-c", _OTHER_PROCESS, str(tmp_path)], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    pool = mha_pool("page_first")
    store = backend(pool, storage_config(tmp_path))
    targets = pool.alloc(2 * PAGE)
    assert store.batch_get_v1(keys_for("shared", 2), targets) == [True, True]
    assert [page_bytes(pool, int(targets[i * PAGE])).hex() for i in range(2)] == written


@pytest.mark.parametrize(
    "other",
    [{"model": "org/other-model"}, {"tp_rank": 1, "tp_size": 2}, {"layout": "page_head"}],
    ids=["model", "tp-rank", "layout"],
)
def test_another_model_rank_or_layout_gets_none(tmp_path: Path, other: dict[str, Any]) -> None:
    pool = mha_pool("page_first")
    _, keys, _, _ = _stored(pool, tmp_path, "page_first")
    layout = str(other.get("layout", "page_first"))
    stranger = backend(mha_pool(layout), storage_config(tmp_path, **other))
    assert stranger.batch_exists(keys) == 0


@pytest.mark.parametrize("layout", ["page_first", "layer_first"])
def test_corrupted_values_are_misses_never_bytes_in_the_host_pool(tmp_path: Path, layout: str) -> None:
    pool = mha_pool(layout)
    store, keys, _, expected = _stored(pool, tmp_path, layout)
    store.close()
    for path in tmp_path.rglob("*"):
        if path.is_file() and not path.name.startswith("."):
            data = bytearray(path.read_bytes())
            data[-1] ^= 0xFF
            path.write_bytes(bytes(data))
    again_pool = mha_pool(layout)
    again = backend(again_pool, storage_config(tmp_path, layout=layout))
    targets = again_pool.alloc(3 * PAGE)
    assert again.batch_get_v1(keys, targets) == [False] * 3
    assert all(page_bytes(again_pool, int(targets[i * PAGE])) != expected[i] for i in range(3))
    assert again.tier_stats().checksum_failures > 0


def test_a_tier_stopped_mid_run_costs_no_wrong_byte_and_no_hang(tmp_path: Path) -> None:
    pool = mha_pool("page_first")
    store, keys, indices, _ = _stored(pool, tmp_path, "page_first")
    store.tier.shutdown()
    fill_random(pool, seed=3)
    before = pool.kv_buffer.clone()
    assert store.batch_get_v1(keys, indices) == [False] * 3
    assert store.batch_set_v1(keys_for("late", 1), indices[:PAGE]) == [False]
    assert torch.equal(before.view(torch.uint8), pool.kv_buffer.view(torch.uint8))


def test_the_old_calls_move_whole_flat_pages(tmp_path: Path) -> None:
    pool = mha_pool("page_first")
    store = backend(pool, storage_config(tmp_path))
    value = torch.randn(pool.get_dummy_flat_data_page().numel()).to(torch.bfloat16)
    assert store.set("k1", value) and store.batch_set(["k2"], [value])
    target = pool.get_dummy_flat_data_page()
    got = store.get("k1", target)
    assert got is not None and torch.equal(got.view(torch.uint8), value.view(torch.uint8))
    assert (
        store.batch_get(["k2", "nope"], [pool.get_dummy_flat_data_page(), pool.get_dummy_flat_data_page()])[1] is None
    )


def test_metrics_reach_sglang_and_kvcontract(tmp_path: Path) -> None:
    pool = mha_pool("page_first")
    store, keys, indices, _ = _stored(pool, tmp_path, "page_first")
    store.batch_get_v1(keys, indices)
    sglang_metrics = store.get_stats()
    assert sglang_metrics.backup_pgs == [3] and sglang_metrics.prefetch_pgs == [3]
    collector = MetricsCollector()
    collector.add(store.metrics_source)
    values = {sample.name: sample.value for sample in collector.collect()}
    assert values["vllm:kv_offload_tiering_read_bytes"] == values["vllm:kv_offload_tiering_write_bytes"] > 0


def test_unknown_keys_are_one_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tierr: unknown key"):
        backend(mha_pool("page_first"), storage_config(tmp_path, extra={"tierr": 1}))


def test_an_unsupported_sglang_is_one_line() -> None:
    with pytest.raises(UnsupportedSGLangError, match="supports SGLang >=0.5.23,<0.6, found SGLang 0.4.9"):
        check_sglang_version("0.4.9")
    assert check_sglang_version("0.5.23") == "0.5.23"


@pytest.mark.parametrize(("layout", "blocks_per_page"), [("page_first", 2), ("layer_first", 1)])
def test_a_capacity_counts_pages_whatever_the_path(tmp_path: Path, layout: str, blocks_per_page: int) -> None:
    pool = mha_pool(layout)
    page = len(page_bytes(pool, 0))
    for capacity in (f"{5 * page}B", 5):
        store = backend(
            pool,
            storage_config(tmp_path, layout=layout, tier={"kind": "file", "path": str(tmp_path), "capacity": capacity}),
        )
        assert isinstance(store.tier, FileTier) and store.tier.capacity == 5 * blocks_per_page
        store.close()


@pytest.mark.parametrize("mla", [False, True], ids=["mha", "mla"])
def test_page_unified_pages_round_trip_in_place_and_write_only_their_pages(tmp_path: Path, mla: bool) -> None:
    pool = mla_pool("page_unified") if mla else mha_pool("page_unified")
    store = backend(pool, storage_config(tmp_path, layout="page_unified", mla=mla))
    assert store.zero_copy
    indices = pool.alloc(3 * PAGE)
    fill_random(pool, seed=7)
    keys = keys_for("unified", 3)
    pages = [int(indices[i * PAGE]) // PAGE for i in range(3)]
    expected = [bytes(pool.kv_buffer[page].contiguous().view(torch.uint8).numpy()) for page in pages]
    assert store.batch_set_v1(keys, indices) == [True] * 3
    targets = pool.alloc(3 * PAGE)
    fill_random(pool, seed=8)
    before = pool.kv_buffer.clone()
    assert store.batch_get_v1(keys, targets) == [True] * 3
    landed = [int(targets[i * PAGE]) // PAGE for i in range(3)]
    assert [bytes(pool.kv_buffer[page].contiguous().view(torch.uint8).numpy()) for page in landed] == expected
    changed = (before.view(torch.uint8) != pool.kv_buffer.view(torch.uint8)).nonzero()
    assert set(changed[:, 0].tolist()) <= set(landed)  # page-major: dim 0 is the page
    value = pool.kv_buffer[pages[0]].reshape(-1).clone()
    assert store.set("flat", value)
    got = store.get("flat", torch.zeros_like(value))
    assert got is not None and torch.equal(got.view(torch.uint8), value.view(torch.uint8))


@pytest.mark.parametrize("indexer", [False, True])
def test_page_first_kv_split_round_trips_byte_exact_through_the_backends_own_copies(
    tmp_path: Path, indexer: bool
) -> None:
    pool = mla_split_pool(indexer=indexer)
    with pytest.raises(ValueError, match="Unsupported layout"):
        pool.get_data_page(
            0
        )  # SGLang gives the layout no page copy: the backend gathers the regions its metadata names
    store = backend(pool, storage_config(tmp_path, layout="page_first_kv_split", mla=True))
    assert not store.zero_copy
    indices = pool.alloc(3 * PAGE)
    fill_split_random(pool, seed=3)
    keys = keys_for("split", 3)
    expected = [split_page_bytes(pool, int(indices[i * PAGE])) for i in range(3)]
    assert store.batch_set_v1(keys, indices) == [True] * 3
    fill_split_random(pool, seed=4)
    others = [split_page_bytes(pool, page * PAGE) for page in range(pool.page_num)]
    reader = backend(mla_split_pool(indexer=indexer), storage_config(tmp_path, layout="page_first_kv_split", mla=True))
    assert reader.batch_exists(keys) == 3  # a second instance on the tier finds them at once
    assert store.batch_get_v1(keys, indices) == [True] * 3
    landed = {int(indices[i * PAGE]) // PAGE: page for i, page in enumerate(expected)}
    assert [split_page_bytes(pool, page * PAGE) for page in range(pool.page_num)] == [
        landed.get(page, other) for page, other in enumerate(others)
    ]  # the given pages byte-exact, every other page untouched


def test_page_first_kv_split_with_and_without_an_indexer_never_share_pages(tmp_path: Path) -> None:
    plain = backend(mla_split_pool(), storage_config(tmp_path, layout="page_first_kv_split", mla=True))
    keys = keys_for("split", 2)
    assert plain.batch_set_v1(keys, plain.mem_pool_host.alloc(2 * PAGE)) == [True, True]
    indexed = backend(mla_split_pool(indexer=True), storage_config(tmp_path, layout="page_first_kv_split", mla=True))
    assert indexed.batch_exists(keys) == 0


def test_page_first_kv_split_without_sglangs_page_metadata_is_refused_in_one_line(tmp_path: Path) -> None:
    pool = mla_split_pool(dcp_size=2)  # SGLang gives split buffers no page metadata under decode context parallelism
    with pytest.raises(ValueError, match="no page metadata .* run SGLang without decode context parallelism"):
        backend(pool, storage_config(tmp_path, layout="page_first_kv_split", mla=True))


def test_sglangs_own_keys_pass(tmp_path: Path) -> None:
    store = backend(mha_pool("page_first"), storage_config(tmp_path, extra={"allocator": "default"}))
    assert store.batch_exists(keys_for("none", 1)) == 0
