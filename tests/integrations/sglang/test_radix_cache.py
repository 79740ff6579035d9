"""SGLang's whole ``UnifiedRadixCache`` with its HiCache controller and the backend its factory loads by module path.

Each cache is built as SGLang's scheduler builds it: the server args published
(``--hicache-storage-backend dynamic`` with the extra config naming kvcontract, write-through,
the ``direct`` I/O backend, host pages ``page_first_direct``, which the backend serves in place,
or ``layer_first``, which it copies; MHA and MLA), SGLang's device pool and
allocator on CPU tensors, then the cache's own ``init_hicache``, which builds the host pool, the
controller and the backend. Requests' pages go through SGLang's own paths: ``insert`` writes
them through to host memory and on to storage under the page hashes SGLang computes, ``evict``
and ``evict_host`` drop them, ``prefetch_from_storage`` brings them into a fresh cache's host
pool and ``load_back`` onto its device. The CPU stand-ins are ``support.radix_cache_stand_ins``.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import time
from array import array
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from kvcontract.integrations.sglang import KVContractHiCacheStorage
from tests.integrations.sglang.support import HEAD_DIM, HEADS, LAYERS, PAGE, fill_random, radix_cache_stand_ins

_server_args = importlib.import_module("sglang.srt.server_args")
_memory = importlib.import_module("sglang.srt.mem_cache.memory_pool")
_allocator = importlib.import_module("sglang.srt.mem_cache.allocator")
_init = importlib.import_module("sglang.srt.mem_cache.cache_init_params")
_radix = importlib.import_module("sglang.srt.mem_cache.radix_cache")
_unified = importlib.import_module("sglang.srt.mem_cache.unified_radix_cache")
_components = importlib.import_module("sglang.srt.mem_cache.unified_cache.components.base")
_base = importlib.import_module("sglang.srt.mem_cache.base_prefix_cache")
_utils = importlib.import_module("sglang.srt.mem_cache.utils")
_runtime = importlib.import_module("sglang.srt.runtime_context")

DEVICE_TOKENS = 128
WAIT = 20.0
SHARED_PAGES, OWN_PAGES = 3, 2


@pytest.fixture(scope="module", autouse=True)
def one_rank() -> Iterator[None]:
    """SGLang's parallel context for a single rank and the CPU stand-ins; SGLang's published server args reset on leaving."""
    with radix_cache_stand_ins(), _runtime.get_parallel().override(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1):
        yield
    _server_args.set_global_server_args_for_scheduler(_server_args.ServerArgs(model_path="dummy"))


class _Engine:
    """One SGLang instance's cache: the ``UnifiedRadixCache``, its allocator and its device pool."""

    def __init__(self, root: Path, layout: str, mla: bool) -> None:
        extra = {
            "backend_name": "kvcontract",
            "module_path": "kvcontract.integrations.sglang",
            "class_name": "KVContractHiCacheStorage",
            "interface_v1": 1,
            "prefetch_threshold": 1,
            "kvcontract": {"tier": {"kind": "file", "path": str(root), "capacity": "4MiB"}},
        }
        args = _server_args.ServerArgs(
            model_path="dummy",
            page_size=PAGE,
            hicache_io_backend="direct",
            hicache_write_policy="write_through",
            hicache_mem_layout=layout,
            hicache_storage_backend="dynamic",
            hicache_storage_backend_extra_config=json.dumps(extra),
        )
        _server_args.set_global_server_args_for_scheduler(args)
        requests = _memory.ReqToTokenPool(size=4, max_context_len=256, device="cpu", enable_memory_saver=False)
        if mla:
            self.device = _memory.MLATokenToKVPool(
                size=DEVICE_TOKENS,
                page_size=PAGE,
                dtype=torch.bfloat16,
                kv_lora_rank=16,
                qk_rope_head_dim=8,
                layer_num=LAYERS,
                device="cpu",
                enable_memory_saver=False,
            )
            self.sides: tuple[list[torch.Tensor], ...] = (self.device.kv_buffer,)
        else:
            self.device = _memory.MHATokenToKVPool(
                size=DEVICE_TOKENS,
                page_size=PAGE,
                dtype=torch.bfloat16,
                head_num=HEADS,
                head_dim=HEAD_DIM,
                layer_num=LAYERS,
                device="cpu",
                enable_memory_saver=False,
            )
            self.sides = (self.device.k_buffer, self.device.v_buffer)
        self.allocator = _allocator.TokenToKVPoolAllocator(
            size=DEVICE_TOKENS, dtype=torch.bfloat16, device="cpu", kvcache=self.device, need_sort=False
        )
        params = _init.CacheInitParams(
            req_to_token_pool=requests,
            token_to_kv_pool_allocator=self.allocator,
            page_size=PAGE,
            disable=False,
            tree_components=(_components.ComponentType.FULL,),
        )
        self.cache = _unified.UnifiedRadixCache(params=params)
        self.cache.init_hicache(args, params)
        atexit.unregister(self.cache.shutdown)  # init_hicache's exit hook: this test shuts the cache down itself
        self.host = self.cache.cache_controller.mem_pool_host.anchor_entry.host_pool

    def match(self, tokens: list[int]) -> Any:
        """SGLang's prefix match of ``tokens``: the device and host hit lengths and nodes."""
        return self.cache.match_prefix(_base.MatchPrefixParams(key=_radix.RadixKey(array("q", tokens))))

    def finish_request(self, tokens: list[int], seed: int) -> list[bytes]:
        """A finished request as the scheduler caches it: its prefix matched, KV computed for the rest, all inserted; its pages' bytes."""
        prefix = self.cache.path_device_indices(self.match(tokens).last_device_node)
        fresh = self.allocator.alloc(len(tokens) - len(prefix))
        generator = torch.Generator().manual_seed(seed)
        for buffers in self.sides:
            for layer in buffers:
                layer[fresh] = torch.randn(len(fresh), *layer.shape[1:], generator=generator).to(layer.dtype)
        value = torch.cat([prefix.to(fresh.dtype), fresh])
        self.cache.insert(_base.InsertParams(key=_radix.RadixKey(array("q", tokens)), value=value))
        return [self.device_page(value[start : start + PAGE]) for start in range(0, len(tokens), PAGE)]

    def device_page(self, indices: torch.Tensor) -> bytes:
        """One page's KV on the device in the order of SGLang's host page view: K then V (MLA: its latent), each layers x tokens."""
        sides = [torch.stack([layer[indices] for layer in buffers]) for buffers in self.sides]
        return bytes(torch.stack(sides).view(torch.uint8).numpy())

    def host_page(self, token_index: int) -> bytes:
        """The bytes of the host page starting at token ``token_index``, through SGLang's own page view."""
        return bytes(self.host.get_data_page(token_index, flat=False).contiguous().view(torch.uint8).numpy())

    def settle(self) -> None:
        """Run the scheduler's event loop until no write to host memory or storage is in flight."""
        _until(lambda: not self.cache.ongoing_write_through and not self.cache.ongoing_backup, self.cache, "backups")

    def prefetch(self, tokens: list[int], rid: str) -> Any:
        """A storage prefetch from the root as the scheduler runs it, to its end; the controller's operation."""
        handle = _base.CacheRequestHandle(rid, 0)
        self.cache.prefetch_from_storage(handle, self.cache.root_node_handle(), array("q", tokens), None, None)
        operation = self.cache.ongoing_prefetch[handle].operation
        _until(lambda: self.cache.check_prefetch_progress(handle), self.cache, "the prefetch")
        return operation

    def load_back(self, node: Any) -> None:
        """Load a host node onto the device as the scheduler does before a forward pass."""
        assert self.cache.load_back(node, req=None)
        assert self.cache.ready_to_load_host_cache() != -1
        for ack in list(self.cache.cache_controller.ack_load_queue):
            ack.finish_event.synchronize()
        self.cache.loading_check()


def _until(done: Callable[[], bool], cache: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        cache.check_hicache_events()
        cache.drain_storage_control_queues()
        if done():
            return
        time.sleep(0.01)
    raise AssertionError(f"{what} did not finish within {WAIT} s")


@contextlib.contextmanager
def _engine(root: Path, layout: str, mla: bool) -> Generator[_Engine, None, None]:
    """An engine on the file tier at ``root``, shut down (storage detached, the tier stopped) on leaving."""
    engine = _Engine(root, layout, mla)
    try:
        yield engine
    finally:
        engine.cache.shutdown()


@pytest.mark.parametrize("mla", [False, True], ids=["mha", "mla"])
@pytest.mark.parametrize("layout", ["page_first_direct", "layer_first"])
def test_a_fresh_cache_prefetches_from_storage_what_another_wrote_through_and_evicted_byte_exact(
    tmp_path: Path, layout: str, mla: bool
) -> None:
    shared = list(range(1000, 1000 + SHARED_PAGES * PAGE))
    first = shared + list(range(2000, 2000 + OWN_PAGES * PAGE))
    second = shared + list(range(3000, 3000 + OWN_PAGES * PAGE))
    with _engine(tmp_path, layout, mla) as writer:
        backend = writer.cache.cache_controller.storage_backend
        assert isinstance(backend, KVContractHiCacheStorage) and backend.zero_copy == (layout == "page_first_direct")
        assert ("mla", str(mla)) in backend.identity.layout_details
        writer.finish_request(first, seed=1)
        pages = writer.finish_request(second, seed=2)  # shares the first's prefix pages on the device
        writer.settle()
        for tokens in (first, second):
            assert (
                backend.batch_exists(_utils.get_storage_hash_str(tokens, None, page_size=PAGE)) == len(tokens) // PAGE
            )
        total = len(shared) + 2 * OWN_PAGES * PAGE
        assert writer.cache.evict(_base.EvictParams(num_tokens=total)).num_tokens_evicted == total
        assert writer.cache.evict_host(total) == total
        for tokens in (first, second):
            dropped = writer.match(tokens)
            assert (dropped.device_prefix_len, dropped.host_hit_length) == (0, 0)
    with _engine(tmp_path, layout, mla) as reader:
        fill_random(reader.host, seed=7)
        before = [reader.host_page(page * PAGE) for page in range(reader.host.page_num)]
        operation = reader.prefetch(second, "second")
        assert operation.completed_tokens == len(second)
        landed = [int(operation.host_indices[start]) for start in range(0, len(second), PAGE)]
        assert [reader.host_page(index) for index in landed] == pages
        after = [reader.host_page(page * PAGE) for page in range(reader.host.page_num)]
        assert [page for page, (old, new) in enumerate(zip(before, after, strict=True)) if old != new] == sorted(
            index // PAGE for index in landed
        )
        hit = reader.match(second)
        assert (hit.device_prefix_len, hit.host_hit_length) == (0, len(second))
        reader.load_back(hit.last_host_node)
        loaded = reader.match(second)
        assert loaded.device_prefix_len == len(second)
        on_device = reader.cache.path_device_indices(loaded.last_device_node)
        assert [reader.device_page(on_device[start : start + PAGE]) for start in range(0, len(second), PAGE)] == pages
