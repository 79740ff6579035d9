"""kvcontract's HiCache backend on a file tier against SGLang's own file backend, through SGLang's own calls.

Both backends store and load the same pages of one SGLang host pool (``page_first``, the
layout SGLang's zero-copy backends use) on the same disk, each in its own directory. The
calls are SGLang's cache controller's own code: ``_page_set_zero_copy`` /
``_page_get_zero_copy`` (``interface_v1``, how SGLang drives a dynamic backend with
``"interface_v1": 1``) for kvcontract, and ``_generic_page_set`` / ``_generic_page_get`` (how
it drives ``--hicache-storage-backend file``) for SGLang's backend, run unbound on a stand-in
controller holding just the backend, the host pool and the page size. Each round stores a
fresh batch of pages (new keys, so both really write), then loads them back; the two sides
alternate which goes first round by round. kvcontract's backend does its I/O on the file
tier's threads, so time is measured as wall time and as the CPU time of the whole process
(all threads), never the calling thread's alone. The figures are medians over rounds of
kvcontract's throughput over SGLang's (higher is better; the target is at least 0.8).

    python tools/bench_sglang_backend.py [--rounds 9] [--pages 64] [--layers 8] [--page-tokens 32] [--dir PATH]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integrations.sglang.cpu_stand_ins import install_stand_ins

install_stand_ins()

from kvcontract.integrations.sglang import KVContractHiCacheStorage  # noqa: E402
from kvcontract.integrations.sglang.options import DEFAULT_POOL_STAGING_PAGES  # noqa: E402

TARGET = 0.8
HEADS, HEAD_DIM = 8, 128


def host_pool(layers: int, page_tokens: int, pages: int) -> Any:
    """SGLang's MHA host pool (page_first, bf16) with room for ``pages`` pages, unpinned."""
    pools = importlib.import_module("sglang.srt.mem_cache.device_pool_info")
    mha = importlib.import_module("sglang.srt.mem_cache.pool_host.mha")
    tokens = page_tokens * 4
    k = tuple(torch.zeros(tokens, HEADS, HEAD_DIM, dtype=torch.bfloat16) for _ in range(layers))
    v = tuple(torch.zeros(tokens, HEADS, HEAD_DIM, dtype=torch.bfloat16) for _ in range(layers))
    pointers = [torch.tensor([t.data_ptr() for t in side], dtype=torch.uint64) for side in (k, v)]
    info = pools.MHABufferInfo(
        buffers=pools.KVBuffers(
            k=k, v=v, k_data_ptrs=pointers[0], v_data_ptrs=pointers[1], layout=pools.KVBufferLayout.NHD
        ),
        page_size=page_tokens,
        head_num=HEADS,
        head_dim=HEAD_DIM,
        v_head_dim=HEAD_DIM,
        dtype=torch.bfloat16,
        device=torch.device("cpu"),
    )
    return mha.MHATokenToKVPoolHost(
        info,
        1.0,
        0,
        page_tokens,
        "page_first",
        pin_memory=False,
        device="cpu",
        device_capacity_tokens=tokens,
        start_layer=0,
        end_layer=layers - 1,
        host_token_capacity=(pages + 2) * page_tokens,
    )


def storage_config(extra: dict[str, object]) -> Any:
    hicache = importlib.import_module("sglang.srt.mem_cache.hicache_storage")
    return hicache.HiCacheStorageConfig(
        tp_rank=0,
        tp_size=1,
        pp_rank=0,
        pp_size=1,
        attn_cp_rank=0,
        attn_cp_size=1,
        is_mla_model=False,
        enable_storage_metrics=False,
        is_page_first_layout=True,
        model_name="bench/model",
        extra_config=extra,
    )


def controller(backend: Any, pool: Any, page_tokens: int) -> Any:
    """What SGLang's controller's page I/O methods read of ``self``."""
    return SimpleNamespace(storage_backend=backend, storage_host_pool=pool, mem_pool_host=pool, page_size=page_tokens)


def timed(work: Callable[[], object], expected: object) -> tuple[float, float]:
    """Wall seconds and process CPU seconds (all threads) of ``work``, which must answer ``expected``."""
    wall, cpu = time.perf_counter(), time.process_time()
    answer = work()
    seconds = time.perf_counter() - wall, time.process_time() - cpu
    if answer != expected:
        raise SystemExit(f"a backend answered {answer!r}, not {expected!r}: the round measured no real I/O")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--pages", type=int, default=64, help="pages per round (SGLang's calls take 128 at most)")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--page-tokens", type=int, default=32)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where both backends keep their files (a temporary directory)"
    )
    args = parser.parse_args()
    cache = importlib.import_module("sglang.srt.managers.cache_controller").HiCacheController
    hicache = importlib.import_module("sglang.srt.mem_cache.hicache_storage")
    root = Path(tempfile.mkdtemp(prefix="bench-sglang-", dir=args.dir))
    pages, size = args.pages, args.page_tokens
    try:
        pool = host_pool(args.layers, size, pages + DEFAULT_POOL_STAGING_PAGES + 1)  # and the backend's reserved pages
        ours = KVContractHiCacheStorage(
            storage_config(
                {
                    "backend_name": "kvcontract",
                    "module_path": "kvcontract.integrations.sglang",
                    "class_name": "KVContractHiCacheStorage",
                    "interface_v1": 1,
                    "kvcontract": {"tier": {"kind": "file", "path": str(root / "kvcontract"), "capacity": "64GiB"}},
                }
            )
        )
        ours.register_mem_pool_host(pool)
        theirs = hicache.HiCacheFile(storage_config({"file_storage_path": str(root / "sglang")}))
        theirs.register_mem_pool_host(pool)
        indices = pool.alloc(pages * size)
        flat = pool.kv_buffer.view(torch.uint8).view(-1)
        flat.copy_(torch.randint(0, 256, (flat.numel(),), dtype=torch.uint8))
        page_bytes = pool.get_data_page(0, flat=True).numel() * 2
        operation = SimpleNamespace(request_id="bench", is_terminated=lambda: False)
        ctl_ours, ctl_theirs = controller(ours, pool, size), controller(theirs, pool, size)
        ratios: dict[str, list[float]] = {"store wall": [], "store cpu": [], "load wall": [], "load cpu": []}
        seconds: dict[str, list[float]] = {
            f"{side} {phase}": [] for side in ("kvcontract", "sglang") for phase in ("store", "load")
        }
        for number in range(args.rounds):
            keys = [hashlib.sha256(f"{number}:{i}".encode()).hexdigest() for i in range(pages)]
            sides = {
                "kvcontract": (
                    lambda: cache._page_set_zero_copy(ctl_ours, keys, indices),
                    lambda: cache._page_get_zero_copy(ctl_ours, operation, keys, indices),
                ),
                "sglang": (
                    lambda: cache._generic_page_set(ctl_theirs, keys, indices),
                    lambda: cache._generic_page_get(ctl_theirs, operation, keys, indices),
                ),
            }
            order = ["kvcontract", "sglang"] if number % 2 == 0 else ["sglang", "kvcontract"]
            times: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {}
            gc.collect()
            gc.disable()
            try:
                for side in order:
                    store, load = sides[side]
                    times[side] = (timed(store, True), timed(load, pages))
            finally:
                gc.enable()
            for phase, at in (("store", 0), ("load", 1)):
                for side in ("kvcontract", "sglang"):
                    seconds[f"{side} {phase}"].append(times[side][at][0])
                for clock, which in (("wall", 0), ("cpu", 1)):
                    ratios[f"{phase} {clock}"].append(times["sglang"][at][which] / times["kvcontract"][at][which])
            assert ours.batch_exists(keys) == pages and theirs.batch_exists(keys) == pages
        megabytes = pages * page_bytes / 1e6
        print(
            f"{args.rounds} rounds of {pages} pages of {page_bytes / 1e6:.2f} MB ({megabytes:.0f} MB a round), page_first, {root}"
        )
        print("kvcontract throughput / SGLang file backend throughput, median over rounds (target >= 0.8):")
        ok = True
        for name, values in ratios.items():
            median = statistics.median(values)
            ok &= median >= TARGET
            print(f"  {name:<10} {median:6.2f}   (rounds: {' '.join(f'{v:.2f}' for v in values)})")
        print(
            "wall seconds per round, median: "
            + ", ".join(f"{name} {statistics.median(values) * 1e3:.1f} ms" for name, values in seconds.items())
        )
        ours.close()
        return 0 if ok else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
