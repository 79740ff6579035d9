"""SGLang's real HybridCacheController drives the backend for a hybrid model: KV, sliding-window KV and Mamba state.

The controller is SGLang 0.5.23's own, attached with ``storage_backend="dynamic"`` over a
``HostPoolGroup`` of SGLang's host pools (KV the anchor, SWA and Mamba beside it), as its hybrid
pool assembler builds one; it registers every pool with the backend (``register_mem_host_pool_v2``).
Its backup thread stores the KV pages through ``batch_set_v1`` and the trailing SWA window and
Mamba state through ``batch_set_v2``; its prefetch threads ask ``batch_exists_v2`` with each
pool's ``TRAILING_PAGES`` rule and load through ``batch_get_v1`` and ``batch_get_v2``. The test
plays the scheduler between the threads (host memory for a hit, the operation to the I/O
thread), as ``UnifiedRadixCache`` does. A second group, MLA KV with its DSA indexer, has the
indexer ride on the KV pages (``indices_from_pool``), as SGLang's base controller moves it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import subprocess
import sys
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist

from kvcontract.integrations.sglang import KVContractHiCacheStorage
from tests.integrations.sglang.support import (
    PAGE,
    PoolHitPolicy,
    PoolName,
    PoolTransfer,
    extra_config,
    file_tier,
    fill_pool_random,
    fill_random,
    indexer_pool,
    mamba_pool,
    mla_pool,
    page_bytes,
)

_hybrid = importlib.import_module("sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller")
_group = importlib.import_module("sglang.srt.mem_cache.pool_host.group")
_memory = importlib.import_module("sglang.srt.mem_cache.memory_pool")
_paged = importlib.import_module("sglang.srt.mem_cache.allocator.paged")
_mha = importlib.import_module("sglang.srt.mem_cache.pool_host.mha")
_utils = importlib.import_module("sglang.srt.mem_cache.utils")
_base = importlib.import_module("sglang.srt.mem_cache.base_prefix_cache")

TOKENS = 64
WAIT = 20.0
WINDOW = 2
"""Pages of the sliding window SGLang keeps for the SWA pool (its ``TRAILING_PAGES`` keys)."""


pytestmark = pytest.mark.usefixtures("gloo_rank")


def _same_layer(layer: int) -> int:
    return layer


def _no_layer(layer: int) -> None:
    """The Mamba state's host pool keeps no per-layer transfer of the KV kind."""
    del layer


def _host(device: Any) -> Any:
    info = device.get_device_pool_infos()[0].buffer_info
    return _mha.MHATokenToKVPoolHost(
        info, 2.0, 0, PAGE, "page_first", pin_memory=False, device="cpu", device_capacity_tokens=TOKENS,
        start_layer=0, end_layer=1,
    )  # fmt: skip


@contextlib.contextmanager
def _attached(root: Path, model: str = "org/hybrid", *, dsa: bool = False) -> Generator[Any, None, None]:
    """SGLang's hybrid controller over KV, SWA and Mamba host pools (``dsa``: MLA KV and its indexer) with the backend attached; detached on leaving."""
    device = _memory.MHATokenToKVPool(TOKENS, PAGE, torch.bfloat16, 2, 8, 2, "cpu", False)
    swa_device = _memory.MHATokenToKVPool(TOKENS, PAGE, torch.bfloat16, 2, 8, 2, "cpu", False)
    allocator = _paged.PagedTokenToKVPoolAllocator(TOKENS, PAGE, torch.bfloat16, "cpu", device, False)
    if dsa:
        anchor = mla_pool("page_first")
        entries = [
            _group.PoolEntry(PoolName.KV, anchor, device, _same_layer, is_primary_index_anchor=True),
            _group.PoolEntry(PoolName.INDEXER, indexer_pool(anchor), None, _same_layer),
        ]
    else:
        entries = [
            _group.PoolEntry(PoolName.KV, _host(device), device, _same_layer, is_primary_index_anchor=True),
            _group.PoolEntry(PoolName.SWA, _host(swa_device), swa_device, _same_layer),
            _group.PoolEntry(PoolName.MAMBA, mamba_pool(), None, _no_layer),
        ]
    group = _group.HostPoolGroup(entries)
    extra = extra_config({"tier": file_tier(root)})
    controller = _hybrid.HybridCacheController(
        allocator, group, PAGE, dist.group.WORLD, threading.Event(), io_backend="direct",
        storage_backend="dynamic", model_name=model, storage_backend_extra_config=extra,
    )  # fmt: skip
    try:
        yield controller
    finally:
        controller.detach_storage_backend()


def _side_transfers(hashes: list[str], indices: dict[str, torch.Tensor] | None = None) -> list[Any]:
    """The SWA window and the Mamba state of a span, as the hybrid cache hands them to the controller."""
    given = indices or {}
    return [
        PoolTransfer(
            name=PoolName(name),
            host_indices=given.get(name),
            keys=hashes[-pages:],
            hit_policy=PoolHitPolicy.TRAILING_PAGES,
        )
        for name, pages in (("swa", WINDOW), ("mamba", 1))
    ]


def _pages(controller: Any, indices: dict[str, torch.Tensor]) -> dict[str, list[str]]:
    """Each pool's pages at ``indices``, as hex."""
    group = controller.mem_pool_host
    pages: dict[str, list[str]] = {}
    for name, where in indices.items():
        pool = group.get_pool(PoolName(name))
        pages[name] = [page_bytes(pool, int(where[i])).hex() for i in range(0, len(where), pool.page_size)]
    return pages


def backup(controller: Any, tokens: list[int]) -> dict[str, list[str]]:
    """A span written through to storage by SGLang's backup thread: the KV pages, the SWA window, the Mamba state."""
    group = controller.mem_pool_host
    indices = {
        "kv": group.alloc(len(tokens), pool=PoolName.KV),
        "swa": group.alloc(WINDOW * PAGE, pool=PoolName.SWA),
        "mamba": group.alloc(1, pool=PoolName.MAMBA),
    }
    for seed, entry in enumerate(group.entries):
        (fill_random if entry.name == PoolName.KV else fill_pool_random)(entry.host_pool, seed + len(tokens))
    hashes = _utils.get_storage_hash_str(tokens, None, page_size=PAGE)
    controller.write_storage(indices["kv"], tokens, hash_value=hashes, extra_pools=_side_transfers(hashes, indices))
    done = controller.ack_backup_queue.get(timeout=WAIT)
    assert done.completed_tokens == len(tokens)
    assert dict(done.pool_storage_result.extra_pool_hit_pages) == {PoolName.SWA: WINDOW, PoolName.MAMBA: 1}
    return _pages(controller, indices)


def prefetch(controller: Any, tokens: list[int]) -> tuple[Any, dict[str, torch.Tensor]]:
    """A prefetch as the scheduler runs it: the query with each pool's rule, then host memory in every pool and the I/O thread."""
    hashes = _utils.get_storage_hash_str(tokens, None, page_size=PAGE)
    operation = controller.prefetch(_base.CacheRequestHandle("req", 0), tokens, extra_pools=_side_transfers(hashes))
    assert controller.prefetch_hit_queue.get(timeout=WAIT) is operation
    if not operation.storage_hit_count:
        return operation, {}
    group = controller.mem_pool_host
    landed = {"kv": group.alloc(operation.storage_hit_count, pool=PoolName.KV)}
    operation.host_indices = landed["kv"]
    for transfer in operation.pool_transfers:
        pool = group.get_pool(transfer.name)
        transfer.host_indices = landed[str(transfer.name)] = group.alloc(
            len(transfer.keys) * pool.page_size, pool=transfer.name
        )
    controller.prefetch_buffer.put(operation)
    while True:
        ack = controller.ack_prefetch_queue.get(timeout=WAIT)
        if ack.completed_req:
            return operation, landed


def test_the_hybrid_controller_registers_every_pool_with_the_backend(tmp_path: Path) -> None:
    with _attached(tmp_path) as controller:
        backend = controller.storage_backend
        assert isinstance(backend, KVContractHiCacheStorage)
        assert backend.pool_names == ["kv", "mamba", "swa"]
        identities = {backend.pool(name).identity.fingerprint for name in backend.pool_names}
        assert len(identities) == 3  # a pool's layout is part of its identity


def test_a_prefix_without_its_trailing_state_is_no_hit(tmp_path: Path) -> None:
    tokens = list(range(6000, 6000 + 4 * PAGE))
    with _attached(tmp_path) as controller:
        group = controller.mem_pool_host
        hashes = _utils.get_storage_hash_str(tokens, None, page_size=PAGE)
        controller.write_storage(group.alloc(len(tokens), pool=PoolName.KV), tokens, hash_value=hashes)
        assert controller.ack_backup_queue.get(timeout=WAIT).completed_tokens == len(tokens)  # KV only, no window
        operation = controller.prefetch(_base.CacheRequestHandle("req", 0), tokens, extra_pools=_side_transfers(hashes))
        assert controller.prefetch_hit_queue.get(timeout=WAIT) is operation
        assert operation.storage_hit_count == 0


_WRITER_PROCESS = """
import sys
from pathlib import Path
import json
from tests.integrations.sglang.support import one_gloo_rank  # puts the CPU stand-ins in place first
from tests.integrations.sglang import test_hybrid_controller as here
root, rendezvous, start = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
with one_gloo_rank(Path(rendezvous)):
    with here._attached(root) as writer:
        pages = here.backup(writer, list(range(start, start + 4 * here.PAGE)))
sys.stdout.write(json.dumps(pages))
"""


def test_a_hybrid_controller_in_another_process_restores_every_pool_byte_exact(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    start = 7000
    written = json.loads(
        subprocess.run(
            [sys.executable, "-c", _WRITER_PROCESS, str(tmp_path / "tier"), str(tmp_path / "rendezvous"), str(start)],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        ).stdout
    )
    tokens = list(range(start, start + 4 * PAGE))
    with _attached(tmp_path / "tier") as reader:
        operation, landed = prefetch(reader, tokens)
        assert operation.storage_hit_count == len(tokens)
        assert dict(operation.query_pool_hit_pages) == {PoolName.KV: 4, PoolName.SWA: 4, PoolName.MAMBA: 4}
        assert _pages(reader, landed) == written
        stats = reader.storage_backend.pool_stats()
        assert (stats["kv"].promoted, stats["swa"].promoted, stats["mamba"].promoted) == (4, WINDOW, 1)


def test_the_dsa_indexer_rides_on_the_kv_pages_through_the_controller_byte_exact(tmp_path: Path) -> None:
    """The indexer's indices come from the KV pool (``indices_from_pool``): SGLang's base controller moves it beside each KV batch."""
    tokens = list(range(8000, 8000 + 3 * PAGE))
    hashes = _utils.get_storage_hash_str(tokens, None, page_size=PAGE)
    with _attached(tmp_path, dsa=True) as writer:
        group = writer.mem_pool_host
        indices = group.alloc(len(tokens), pool=PoolName.KV)
        fill_random(group.get_pool(PoolName.KV), seed=1)
        fill_pool_random(group.get_pool(PoolName.INDEXER), seed=2)
        written = _pages(writer, {"indexer": indices})
        riding = PoolTransfer(name=PoolName.INDEXER, indices_from_pool=PoolName.KV)
        writer.write_storage(indices, tokens, hash_value=hashes, extra_pools=[riding])
        assert writer.ack_backup_queue.get(timeout=WAIT).completed_tokens == len(tokens)
    with _attached(tmp_path, dsa=True) as reader:
        asked = PoolTransfer(name=PoolName.INDEXER, indices_from_pool=PoolName.KV, hit_policy=PoolHitPolicy.ALL_PAGES)
        operation = reader.prefetch(_base.CacheRequestHandle("req", 0), tokens, extra_pools=[asked])
        assert reader.prefetch_hit_queue.get(timeout=WAIT) is operation
        assert operation.storage_hit_count == len(tokens)
        assert dict(operation.query_pool_hit_pages) == {PoolName.KV: 3, PoolName.INDEXER: 3}
        operation.host_indices = reader.mem_pool_host.alloc(len(tokens), pool=PoolName.KV)
        reader.prefetch_buffer.put(operation)
        while not reader.ack_prefetch_queue.get(timeout=WAIT).completed_req:
            pass
        assert _pages(reader, {"indexer": operation.host_indices}) == written
        assert reader.storage_backend.pool_stats()["indexer"].promoted == 3
