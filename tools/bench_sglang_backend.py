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

``--mode v2`` measures the backend's ``*_v2`` path (a hybrid model's side pools) against its
``interface_v1`` path on the same bytes: one host pool registered as the KV pool (v1 calls)
and, under a second name, as a side pool (v2 calls, one ``PoolTransfer``), each its own tier
directory; fresh keys each round, the two paths alternating which goes first; the figures
are medians of v2's throughput over v1's in wall time, in the calling thread's CPU time
(``time.thread_time``: what the backend costs SGLang's I/O thread) and in the process's.
``--mode hybrid`` stores and loads one span of ``--pages`` pages of three models of the same
size (``--layers`` layers of the same heads) through the backend and prints the bytes each
pool moved: full attention (every layer in the KV pool); half the layers sliding-window
(``--window`` pages kept, as SGLang keeps a SWA pool's trailing pages); and three quarters
of the layers linear attention with a Mamba state (one state slot per span).
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
from tests.integrations.sglang.support import install_stand_ins

install_stand_ins()

from kvcontract.integrations.sglang import KVContractHiCacheStorage  # noqa: E402
from kvcontract.integrations.sglang.options import DEFAULT_POOL_STAGING_PAGES  # noqa: E402

TARGET = 0.8
HEADS, HEAD_DIM = 8, 128


def host_pool(layers: int, page_tokens: int, pages: int, heads: int = HEADS) -> Any:
    """SGLang's MHA host pool (page_first, bf16) with room for ``pages`` pages, unpinned."""
    pools = importlib.import_module("sglang.srt.mem_cache.device_pool_info")
    mha = importlib.import_module("sglang.srt.mem_cache.pool_host.mha")
    tokens = page_tokens * 4
    k = tuple(torch.zeros(tokens, heads, HEAD_DIM, dtype=torch.bfloat16) for _ in range(layers))
    v = tuple(torch.zeros(tokens, heads, HEAD_DIM, dtype=torch.bfloat16) for _ in range(layers))
    pointers = [torch.tensor([t.data_ptr() for t in side], dtype=torch.uint64) for side in (k, v)]
    info = pools.MHABufferInfo(
        buffers=pools.KVBuffers(
            k=k, v=v, k_data_ptrs=pointers[0], v_data_ptrs=pointers[1], layout=pools.KVBufferLayout.NHD
        ),
        page_size=page_tokens,
        head_num=heads,
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
    parser.add_argument(
        "--mode",
        choices=("sglang", "v2", "hybrid"),
        default="sglang",
        help="against SGLang's file backend; the v2 path against v1; bytes per pool of hybrid models",
    )
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--pages", type=int, default=64, help="pages per round (SGLang's calls take 128 at most)")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--page-tokens", type=int, default=32)
    parser.add_argument("--window", type=int, default=4, help="--mode hybrid: pages of the sliding window")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where both backends keep their files (a temporary directory)"
    )
    args = parser.parse_args()
    if args.mode == "v2":
        return v2_against_v1(args)
    if args.mode == "hybrid":
        return hybrid_bytes(args)
    return against_sglang(args)


def against_sglang(args: argparse.Namespace) -> int:
    """kvcontract's backend (v1 calls) against SGLang's file backend on the same pages."""
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


def kvcontract_config(root: Path) -> Any:
    """SGLang's storage config naming kvcontract's backend on a file tier under ``root``."""
    return storage_config(
        {
            "backend_name": "kvcontract",
            "module_path": "kvcontract.integrations.sglang",
            "class_name": "KVContractHiCacheStorage",
            "interface_v1": 1,
            "kvcontract": {"tier": {"kind": "file", "path": str(root), "capacity": "64GiB"}},
        }
    )


def clocked(work: Callable[[], object], expected: object) -> tuple[float, float, float]:
    """Wall seconds, the calling thread's CPU seconds and the process's CPU seconds of ``work``, which must answer ``expected``."""
    wall, thread, cpu = time.perf_counter(), time.thread_time(), time.process_time()
    answer = work()
    seconds = time.perf_counter() - wall, time.thread_time() - thread, time.process_time() - cpu
    if answer != expected:
        raise SystemExit(f"the backend answered {answer!r}, not {expected!r}: the round measured no real I/O")
    return seconds


def v2_against_v1(args: argparse.Namespace) -> int:
    """The backend's v2 path (a side pool's ``PoolTransfer``) against its v1 path (the KV pool) on the same host pages."""
    hicache = importlib.import_module("sglang.srt.mem_cache.hicache_storage")
    root = Path(tempfile.mkdtemp(prefix="bench-sglang-v2-", dir=args.dir))
    pages, size = args.pages, args.page_tokens
    try:
        pool = host_pool(args.layers, size, pages + DEFAULT_POOL_STAGING_PAGES + 1)
        ours = KVContractHiCacheStorage(kvcontract_config(root))
        ours.register_mem_pool_host(pool)
        ours.register_mem_host_pool_v2(pool, hicache.PoolName.SWA)  # the same pages, served as a side pool
        indices = pool.alloc(pages * size)
        flat = pool.kv_buffer.view(torch.uint8).view(-1)
        flat.copy_(torch.randint(0, 256, (flat.numel(),), dtype=torch.uint8))
        page_bytes = ours.pool("kv").page_bytes
        clocks = ("wall", "thread cpu", "process cpu")
        ratios: dict[str, list[float]] = {f"{phase} {clock}": [] for phase in ("store", "load") for clock in clocks}
        for number in range(args.rounds):
            keys = [hashlib.sha256(f"v2:{number}:{i}".encode()).hexdigest() for i in range(pages)]

            def transfer() -> Any:
                return hicache.PoolTransfer(name=hicache.PoolName.SWA, host_indices=indices, keys=keys)

            sides: dict[str, tuple[Callable[[], object], object, Callable[[], object], object]] = {
                "v1": (
                    lambda: ours.batch_set_v1(keys, indices),
                    [True] * pages,
                    lambda: ours.batch_get_v1(keys, indices),
                    [True] * pages,
                ),
                "v2": (
                    lambda: ours.batch_set_v2([transfer()]),
                    {hicache.PoolName.SWA: [True] * pages},
                    lambda: ours.batch_get_v2([transfer()]),
                    {hicache.PoolName.SWA: [True] * pages},
                ),
            }
            order = ["v1", "v2"] if number % 2 == 0 else ["v2", "v1"]
            times: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {}
            gc.collect()
            gc.disable()
            try:
                for side in order:
                    store, stored, load, loaded = sides[side]
                    times[side] = (clocked(store, stored), clocked(load, loaded))
            finally:
                gc.enable()
            for phase, at in (("store", 0), ("load", 1)):
                for which, clock in enumerate(clocks):
                    ratios[f"{phase} {clock}"].append(times["v1"][at][which] / times["v2"][at][which])
        print(
            f"{args.rounds} rounds of {pages} pages of {page_bytes / 1e6:.2f} MB, page_first, zero copy, file tier, {root}"
        )
        print("v2 throughput / v1 throughput on the same pages, median over rounds (1.00: the same):")
        for name, values in ratios.items():
            print(f"  {name:<17} {statistics.median(values):6.2f}   (rounds: {' '.join(f'{v:.2f}' for v in values)})")
        ours.close()
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def hybrid_bytes(args: argparse.Namespace) -> int:
    """Bytes each pool stores and loads for one span, for a full-attention model and two hybrids of the same size."""
    hicache = importlib.import_module("sglang.srt.mem_cache.hicache_storage")
    device_info = importlib.import_module("sglang.srt.mem_cache.device_pool_info")
    mamba = importlib.import_module("sglang.srt.mem_cache.pool_host.mamba")
    pages, size, layers, window = args.pages, args.page_tokens, args.layers, args.window
    if layers % 4 or window > pages:
        raise SystemExit("--mode hybrid: give --layers a multiple of 4 and --window at most --pages")

    def state_pool(state_layers: int) -> Any:
        """A Mamba state pool of ``state_layers`` layers (Qwen3-Next-like: fp32 recurrent state, bf16 conv state)."""
        temporal = torch.zeros(state_layers, 4, HEADS, HEAD_DIM, HEAD_DIM // 4, dtype=torch.float32)
        conv = (torch.zeros(state_layers, 4, 3, 2 * HEADS * HEAD_DIM, dtype=torch.bfloat16),)
        info = device_info.MambaStateBufferInfo(temporal=temporal, conv=conv)
        return mamba.MambaPoolHost(info, 1.0, 0, device_capacity=4, pin_memory=False, device="cpu", layout="page_first")

    models: dict[str, dict[str, tuple[Any, int]]] = {
        "full attention": {"kv": (host_pool(layers, size, pages + DEFAULT_POOL_STAGING_PAGES + 1), pages)},
        f"half sliding window ({window} pages)": {
            "kv": (host_pool(layers // 2, size, pages + DEFAULT_POOL_STAGING_PAGES + 1), pages),
            "swa": (host_pool(layers // 2, size, window), window),
        },
        "3/4 linear attention (Mamba)": {
            "kv": (host_pool(layers // 4, size, pages + DEFAULT_POOL_STAGING_PAGES + 1), pages),
            "mamba": (state_pool(3 * layers // 4), 1),
        },
    }
    root = Path(tempfile.mkdtemp(prefix="bench-sglang-hybrid-", dir=args.dir))
    try:
        print(f"one span of {pages} pages of {size} tokens, {layers} layers of {HEADS} KV heads of {HEAD_DIM} (bf16):")
        print(f"  {'model':<36} {'pool':<6} {'pages':>5} {'stored MB':>10} {'loaded MB':>10}")
        full = 0
        for number, (model, pools) in enumerate(models.items()):
            store = KVContractHiCacheStorage(kvcontract_config(root / str(number)))
            kv_pool = pools["kv"][0]
            store.register_mem_pool_host(kv_pool)
            for name, (pool, _) in pools.items():
                store.register_mem_host_pool_v2(pool, hicache.PoolName(name))
            keys = [hashlib.sha256(f"span:{i}".encode()).hexdigest() for i in range(pages)]
            kv_indices = kv_pool.alloc(pages * size)
            transfers = [
                hicache.PoolTransfer(
                    name=hicache.PoolName(name),
                    host_indices=pool.alloc(count * pool.page_size),
                    keys=keys[-count:],
                    hit_policy=hicache.PoolHitPolicy.TRAILING_PAGES,
                )
                for name, (pool, count) in pools.items()
                if name != "kv"
            ]
            assert all(store.batch_set_v1(keys, kv_indices)) and all(
                ok for answers in store.batch_set_v2(transfers).values() for ok in answers
            )
            assert all(store.batch_get_v1(keys, kv_indices)) and all(
                ok for answers in store.batch_get_v2(transfers).values() for ok in answers
            )
            total = 0
            for name, stats in store.pool_stats().items():
                total += stats.bytes_written
                print(
                    f"  {model:<36} {name:<6} {stats.written:>5} {stats.bytes_written / 1e6:>10.2f} {stats.bytes_read / 1e6:>10.2f}"
                )
            full = full or total
            print(f"  {model:<36} {'all':<6} {'':>5} {total / 1e6:>10.2f}   ({total / full:.2f} of full attention)")
            store.close()
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
