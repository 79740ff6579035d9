"""The backend's ``*_v2`` calls on SGLang's real hybrid host pools: sliding-window KV, Mamba state, the DSA indexer beside MLA.

Each pool is registered as SGLang's hybrid controller registers it (``register_mem_pool_host``
for the KV pool, then ``register_mem_host_pool_v2`` for every pool of the group). The hit rules
are checked against SGLang's own file backend (``HiCacheFile.batch_exists_v2``) holding the same
pages: SGLang's reading of its rules is the reference.
"""

from __future__ import annotations

import importlib
import itertools
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcontract.integrations.sglang import KVContractHiCacheStorage
from tests.integrations.sglang.support import (
    PAGE,
    PoolName,
    backend,
    fill_pool_random,
    fill_random,
    hybrid_backend,
    indexer_pool,
    keys_for,
    mamba_pool,
    mha_pool,
    mla_pool,
    page_bytes,
    storage_config,
    transfer,
)
from tests.profiles import THOROUGH

_hicache = importlib.import_module("sglang.srt.mem_cache.hicache_storage")
_host_memory = importlib.import_module("sglang.srt.mem_cache.memory_pool_host")
_factory = importlib.import_module("sglang.srt.mem_cache.storage.backend_factory")

Pools = tuple[Any, Any, bool]
"""The KV pool, the side pool, and whether the model is MLA."""


def _swa(layout: str) -> Callable[[], Pools]:
    return lambda: (mha_pool(layout), mha_pool(layout), False)


def _mamba() -> Pools:
    return mha_pool("page_first"), mamba_pool(), False


def _indexer() -> Pools:
    anchor = mla_pool("page_first")
    return anchor, indexer_pool(anchor), True


KINDS: dict[str, tuple[str, Callable[[], Pools], str]] = {
    "swa-page_first": ("swa", _swa("page_first"), "trailing_pages"),
    "swa-layer_first": ("swa", _swa("layer_first"), "trailing_pages"),
    "mamba": ("mamba", _mamba, "trailing_pages"),
    "indexer-mla": ("indexer", _indexer, "all_pages"),
}


def _side_indices(name: str, kv_indices: torch.Tensor, side: Any, pages: int) -> torch.Tensor:
    """Where a pool's pages lie: the indexer's on the KV pages (SGLang derives its indices from KV), the others' in their own pool."""
    if name == "indexer":
        return kv_indices
    indices: torch.Tensor = side.alloc(pages * side.page_size)
    return indices


def _side_pages(side: Any, indices: torch.Tensor, pages: int) -> list[bytes]:
    return [page_bytes(side, int(indices[i * side.page_size])) for i in range(pages)]


@pytest.mark.parametrize("kind", KINDS)
def test_every_pool_round_trips_byte_exact_and_a_second_instance_finds_and_loads_it(tmp_path: Path, kind: str) -> None:
    name, build, policy = KINDS[kind]
    kv, side, mla = build()
    config = storage_config(tmp_path, layout=kv.layout, mla=mla)
    store = hybrid_backend(kv, config, {name: side})
    assert store.pool_names == sorted(["kv", name])
    keys = keys_for(kind, 3)
    kv_indices = kv.alloc(3 * PAGE)
    side_indices = _side_indices(name, kv_indices, side, 3)
    fill_random(kv, seed=1)
    fill_pool_random(side, seed=2)
    expected = _side_pages(side, side_indices, 3)
    assert store.batch_set_v1(keys, kv_indices) == [True] * 3
    assert store.batch_set_v2([transfer(name, keys, side_indices, policy)]) == {PoolName(name): [True] * 3}
    fill_pool_random(side, seed=3)
    assert store.batch_get_v2([transfer(name, keys, side_indices, policy)]) == {PoolName(name): [True] * 3}
    assert _side_pages(side, side_indices, 3) == expected
    stats = store.pool_stats()[name]
    assert stats.bytes_written == stats.bytes_read == 3 * store.pool(name).page_bytes
    store.close()

    kv2, side2, _ = build()
    again = hybrid_backend(kv2, config, {name: side2})  # new process state, same tier
    found = again.batch_exists_v2(keys, [transfer(name, keys[-1:], None, policy)])
    assert found.kv_hit_pages == 3 and found.extra_pool_hit_pages[PoolName(name)] == 3
    targets = kv2.alloc(3 * PAGE)
    landed = _side_indices(name, targets, side2, 3)
    assert again.batch_get_v2([transfer(name, keys, landed, policy)]) == {PoolName(name): [True] * 3}
    assert _side_pages(side2, landed, 3) == expected
    again.close()


def test_zero_copy_false_makes_a_side_pool_copy_through_rows_of_the_backends_own(tmp_path: Path) -> None:
    kv, swa = mha_pool("page_first"), mha_pool("page_first")
    section: dict[str, object] = {
        "tier": {"kind": "file", "path": str(tmp_path), "capacity": "4MiB"},
        "zero_copy": False,
    }
    store = hybrid_backend(kv, storage_config(tmp_path, extra={"kvcontract": section}), {"swa": swa})
    side = store.pool("swa")
    assert not side.zero_copy and side.table.staged and side.reserved is None
    keys, indices = keys_for("copied", 2), swa.alloc(2 * PAGE)
    fill_pool_random(swa, seed=4)
    expected = _side_pages(swa, indices, 2)
    assert store.batch_set_v2([transfer("swa", keys, indices)]) == {PoolName.SWA: [True, True]}
    fill_pool_random(swa, seed=5)
    assert store.batch_get_v2([transfer("swa", keys, indices)]) == {PoolName.SWA: [True, True]}
    assert _side_pages(swa, indices, 2) == expected
    store.close()


def test_a_pool_never_reads_another_pools_or_another_layouts_pages(tmp_path: Path) -> None:
    kv, swa = mha_pool("page_first"), mha_pool("page_first")  # the same geometry: only the pool's name tells them apart
    store = hybrid_backend(kv, storage_config(tmp_path), {"swa": swa, "mamba": mamba_pool()})
    keys = keys_for("apart", 2)
    assert store.batch_set_v2([transfer("swa", keys, swa.alloc(2 * PAGE))]) == {PoolName.SWA: [True, True]}
    assert store.batch_exists(keys) == 0  # SWA pages are no KV pages
    assert store.batch_set_v1(keys, kv.alloc(2 * PAGE)) == [True, True]
    assert store.batch_set_v2([transfer("mamba", keys[-1:], store.pool("mamba").host_pool.alloc(1))])
    store.close()
    other = hybrid_backend(mha_pool("page_first"), storage_config(tmp_path), {"mamba": mamba_pool(conv_width=5)})
    found = other.batch_exists_v2(keys, [transfer("mamba", keys[-1:], None, "trailing_pages")])
    assert found.kv_hit_pages == 0 and PoolName.MAMBA not in found.extra_pool_hit_pages  # another state shape: a miss
    other.close()


def test_a_pool_without_a_page_view_is_refused_at_registration_naming_it(tmp_path: Path) -> None:
    store = backend(mha_pool("page_first"), storage_config(tmp_path))
    unseen = mha_pool("page_first")
    unseen.layout = "page_envelope"  # stands in for a host layout a later SGLang adds, which the backend has no view of
    with pytest.raises(ValueError, match="cannot store SGLang's 'swa' pool \\(MHATokenToKVPoolHost\\)"):
        store.register_mem_host_pool_v2(unseen, PoolName.SWA)
    assert store.pool_names == ["kv"]
    store.close()


@pytest.mark.parametrize("name", ["kv", "swa"])
def test_a_logical_pool_with_no_bytes_is_refused_at_registration_naming_it(tmp_path: Path, name: str) -> None:
    logical = _host_memory.LogicalHostPool(8 * PAGE, PAGE)  # SGLang's index-only anchor of some hybrid groups
    refusal = f"cannot store SGLang's '{name}' pool \\(LogicalHostPool\\): its pages hold no bytes"
    with pytest.raises(ValueError, match=refusal):
        if name == "kv":
            _factory.StorageBackendFactory.create_backend(
                "dynamic", storage_config(tmp_path), logical
            ).register_mem_pool_host(logical)
        else:
            backend(mha_pool("page_first"), storage_config(tmp_path)).register_mem_host_pool_v2(logical, PoolName(name))


def test_a_v2_call_naming_a_pool_never_registered_is_one_line(tmp_path: Path) -> None:
    store = backend(mha_pool("page_first"), storage_config(tmp_path))
    with pytest.raises(ValueError, match="names pool 'mamba', which SGLang never registered"):
        store.batch_get_v2([transfer("mamba", keys_for("x", 1), torch.arange(1))])
    store.close()


def test_mla_side_pools_store_on_the_writer_rank_but_the_mamba_state_on_every_rank(tmp_path: Path) -> None:
    anchor = mla_pool("page_first")
    reader = hybrid_backend(
        anchor,
        storage_config(tmp_path, mla=True, tp_rank=1, tp_size=2),
        {"indexer": indexer_pool(anchor), "mamba": mamba_pool()},
    )
    keys = keys_for("ranks", 1)
    kv_indices = anchor.alloc(PAGE)
    mamba_indices = reader.pool("mamba").host_pool.alloc(1)
    answers = reader.batch_set_v2([transfer("indexer", keys, kv_indices), transfer("mamba", keys, mamba_indices)])
    assert answers == {PoolName.INDEXER: [True], PoolName.MAMBA: [True]}
    stats = reader.pool_stats()
    assert stats["indexer"].written == 0 and stats["mamba"].written == 1  # TP-sharded state: this rank's own
    reader.close()


def test_block_groups_report_whole_groups_and_never_cut_the_kv_hit(tmp_path: Path) -> None:
    kv, swa = mha_pool("page_first"), mha_pool("page_first")
    store = hybrid_backend(kv, storage_config(tmp_path), {"swa": swa})
    keys = keys_for("groups", 4)
    assert store.batch_set_v1(keys, kv.alloc(4 * PAGE)) == [True] * 4
    store.batch_set_v2([transfer("swa", keys[:3], swa.alloc(3 * PAGE))])  # one whole group of 2, half of the next
    groups = transfer("swa", keys, None, "block_groups")
    groups.group_pages, groups.block_pages = 2, 2
    found = store.batch_exists_v2(keys, [groups])
    assert found.kv_hit_pages == 4 and found.extra_pool_hit_pages[PoolName.SWA] == 2
    store.close()


_names = itertools.count()


@settings(
    max_examples=200 if THOROUGH else 25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    kv_present=st.lists(st.booleans(), min_size=1, max_size=6),
    side_present=st.lists(st.booleans(), min_size=6, max_size=6),
    policy=st.sampled_from(["all_pages", "trailing_pages"]),
    window=st.integers(1, 3),
)
def test_the_hit_rules_answer_as_sglangs_own_file_backend(
    kv_present: list[bool], side_present: list[bool], policy: str, window: int
) -> None:
    with tempfile.TemporaryDirectory() as root:
        kv, swa = mha_pool("page_first"), mha_pool("page_first")
        config = storage_config(Path(root) / "kvcontract")
        store = hybrid_backend(kv, config, {"swa": swa})
        reference = _hicache.HiCacheFile(storage_config(Path(root) / "sglang"), file_path=str(Path(root) / "sglang"))
        keys = keys_for(f"rules-{next(_names)}", len(kv_present))
        one = torch.zeros(8, dtype=torch.uint8)
        for index, key in enumerate(keys):
            if kv_present[index]:
                assert store.batch_set_v1([key], kv.alloc(PAGE)) == [True]
                assert reference.set(key, one)
            if side_present[index]:
                assert store.batch_set_v2([transfer("swa", [key], swa.alloc(PAGE))])[PoolName.SWA] == [True]
                assert reference.set(f"{key}.swa", one)
        asked = [transfer("swa", keys[-window:], None, policy)]
        ours: Any = store.batch_exists_v2(keys, asked)
        theirs: Any = reference.batch_exists_v2(keys, asked)
        assert (ours.kv_hit_pages, ours.restorable_prefix_pages) == (
            theirs.kv_hit_pages,
            theirs.restorable_prefix_pages,
        )
        assert dict(ours.extra_pool_hit_pages) == dict(theirs.extra_pool_hit_pages)
        store.close()


def test_the_backend_is_sglangs_v2_backend(tmp_path: Path) -> None:
    store = backend(mha_pool("page_first"), storage_config(tmp_path))
    assert isinstance(store, KVContractHiCacheStorage)
    assert store.batch_exists_v2([], None).kv_hit_pages == 0
    store.close()
