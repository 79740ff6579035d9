"""SGLang's real HiCacheController drives the backend: its backup thread stores real pages, its prefetch threads find and load them.

The controller is SGLang 0.5.23's own, attached with ``storage_backend="dynamic"`` and the
extra config naming kvcontract, over SGLang's device pool (CPU tensors), paged allocator and
host pool; torch.distributed runs a one-rank gloo group, as SGLang's scheduler sets up. The
test plays the scheduler's part between the threads (allocate host memory for a prefetch hit,
hand the operation to the I/O thread) exactly as ``UnifiedRadixCache`` does.
"""

from __future__ import annotations

import contextlib
import importlib
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
from tests.integrations.sglang.support import PAGE, extra_config, file_tier, fill_random, page_bytes

_controller = importlib.import_module("sglang.srt.managers.cache_controller")
_memory = importlib.import_module("sglang.srt.mem_cache.memory_pool")
_paged = importlib.import_module("sglang.srt.mem_cache.allocator.paged")
_mha = importlib.import_module("sglang.srt.mem_cache.pool_host.mha")
_utils = importlib.import_module("sglang.srt.mem_cache.utils")

TOKENS = 64
WAIT = 20.0


pytestmark = pytest.mark.usefixtures("gloo_rank")


def _controller_on(root: Path, layout: str, model: str = "org/model") -> Any:
    device = _memory.MHATokenToKVPool(TOKENS, PAGE, torch.bfloat16, 2, 8, 2, "cpu", False)
    allocator = _paged.PagedTokenToKVPoolAllocator(TOKENS, PAGE, torch.bfloat16, "cpu", device, False)
    info = device.get_device_pool_infos()[0].buffer_info
    host = _mha.MHATokenToKVPoolHost(
        info,
        2.0,
        0,
        PAGE,
        layout,
        pin_memory=False,
        device="cpu",
        device_capacity_tokens=TOKENS,
        start_layer=0,
        end_layer=1,
    )
    extra = extra_config({"tier": file_tier(root)})
    return _controller.HiCacheController(
        allocator,
        host,
        PAGE,
        dist.group.WORLD,
        threading.Event(),
        io_backend="direct",
        storage_backend="dynamic",
        model_name=model,
        storage_backend_extra_config=extra,
    )


def _backup(controller: Any, tokens: list[int]) -> tuple[Any, list[bytes]]:
    host = controller.mem_pool_host
    indices = host.alloc(len(tokens))
    fill_random(host, seed=len(tokens))
    pages = [page_bytes(host, int(indices[i])) for i in range(0, len(tokens), PAGE)]
    hashes = _utils.get_storage_hash_str(tokens, None, page_size=PAGE)
    controller.write_storage(indices, tokens, hash_value=hashes)
    done = controller.ack_backup_queue.get(timeout=WAIT)
    assert done.completed_tokens == len(tokens)
    return indices, pages


def _prefetch(controller: Any, tokens: list[int]) -> tuple[Any, torch.Tensor | None]:
    """A prefetch as the scheduler runs it: query, then (on a hit) host memory and the I/O thread; the operation and where it landed."""
    operation = controller.prefetch("req", tokens)
    hit = controller.prefetch_hit_queue.get(timeout=WAIT)
    assert hit is operation
    if not operation.storage_hit_count:
        return operation, None
    operation.host_indices = controller.mem_pool_host.alloc(operation.storage_hit_count)
    controller.prefetch_buffer.put(operation)
    while True:
        ack = controller.ack_prefetch_queue.get(timeout=WAIT)
        if ack.completed_req:
            return operation, operation.host_indices
        operation.completed_tokens = ack.completed_tokens


@contextlib.contextmanager
def _attached(root: Path, layout: str = "page_first", model: str = "org/model") -> Generator[Any, None, None]:
    """A controller with the backend attached, detached (its threads stopped, the tier shut down) on leaving."""
    controller = _controller_on(root, layout, model)
    try:
        yield controller
    finally:
        controller.detach_storage_backend()


@pytest.mark.parametrize("layout", ["page_first", "layer_first"])
def test_the_controller_backs_up_and_another_instance_prefetches_byte_exact(tmp_path: Path, layout: str) -> None:
    tokens = list(range(1000, 1000 + 5 * PAGE))
    with _attached(tmp_path, layout) as writer:
        assert isinstance(writer.storage_backend, KVContractHiCacheStorage)
        assert writer.page_set_func.__name__ == "_page_set_zero_copy"  # interface_v1: SGLang's zero-copy calls
        _, pages = _backup(writer, tokens)
    with _attached(tmp_path, layout) as reader:
        operation, landed = _prefetch(reader, tokens)
        assert operation.storage_hit_count == len(tokens)
        assert landed is not None and operation.completed_tokens == len(tokens)
        host = reader.mem_pool_host
        assert [page_bytes(host, int(landed[i])) for i in range(0, len(tokens), PAGE)] == pages
        missing, _ = _prefetch(reader, list(range(5 * PAGE)))
        assert missing.storage_hit_count == 0


def test_the_controller_of_another_model_prefetches_nothing(tmp_path: Path) -> None:
    tokens = list(range(2000, 2000 + 3 * PAGE))
    with _attached(tmp_path) as writer:
        _backup(writer, tokens)
    with _attached(tmp_path, model="org/other") as stranger:
        operation, _ = _prefetch(stranger, tokens)
        assert operation.storage_hit_count == 0


def test_a_prefix_stored_half_prefetches_only_that_half(tmp_path: Path) -> None:
    tokens = list(range(3000, 3000 + 4 * PAGE))
    with _attached(tmp_path) as writer:
        _backup(writer, tokens[: 2 * PAGE])
        operation, _ = _prefetch(writer, tokens)
        assert operation.storage_hit_count == 2 * PAGE  # batch_exists: hits up to the first miss


def test_a_tier_stopped_under_the_controller_costs_no_wrong_byte_and_no_hang(tmp_path: Path) -> None:
    tokens = list(range(4000, 4000 + 3 * PAGE))
    with _attached(tmp_path) as controller:
        _backup(controller, tokens)
        backend = controller.storage_backend
        assert isinstance(backend, KVContractHiCacheStorage)
        backend.tier.shutdown()
        host = controller.mem_pool_host
        fill_random(host, seed=99)
        before = host.kv_buffer.clone()
        operation, landed = _prefetch(controller, tokens)
        assert landed is None or operation.completed_tokens == 0  # the stopped tier loads nothing...
        assert torch.equal(before.view(torch.uint8), host.kv_buffer.view(torch.uint8))  # ...and writes no byte
        fresh = list(range(PAGE))
        controller.write_storage(
            host.alloc(PAGE), fresh, hash_value=_utils.get_storage_hash_str(fresh, None, page_size=PAGE)
        )
        assert controller.ack_backup_queue.get(timeout=WAIT).completed_tokens == 0


_WRITER_PROCESS = """
import sys
from pathlib import Path
from tests.integrations.sglang.support import one_gloo_rank  # puts the CPU stand-ins in place first
from tests.integrations.sglang import test_controller as here
root, rendezvous, start = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
with one_gloo_rank(Path(rendezvous)):
    with here._attached(root) as writer:
        _, pages = here._backup(writer, list(range(start, start + 4 * here.PAGE)))
sys.stdout.write("".join(page.hex() + "\\n" for page in pages))
"""


def test_a_controller_in_another_process_prefetches_the_first_ones_pages_byte_exact(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    start = 5000
    written = subprocess.run(
        [sys.executable, "-c", _WRITER_PROCESS, str(tmp_path / "tier"), str(tmp_path / "rendezvous"), str(start)],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout.split()
    tokens = list(range(start, start + 4 * PAGE))
    with _attached(tmp_path / "tier") as reader:
        operation, landed = _prefetch(reader, tokens)
        assert operation.storage_hit_count == len(tokens) and landed is not None
        host = reader.mem_pool_host
        assert [page_bytes(host, int(landed[i])).hex() for i in range(0, len(tokens), PAGE)] == written
