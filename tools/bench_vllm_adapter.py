"""CPU time of kvcontract behind vLLM's scheduler calls: against vLLM's own CPU manager, and what the adapter adds.

``--matrix`` (the target): lru and arc at 2, 5 and 10 % of the trace's unique blocks, kvcontract
through ``KVContractOffloadingManager`` against vLLM's own ``CPUOffloadingManager`` behind the
same scheduler calls (``replay_as_scheduler``), with a column per vLLM release: the installed
one, and each ``--also PYTHON`` (a venv with the other supported release) measured there and read
back. Targets: lru at least 3x and arc at least 2x faster per block, and a hit ratio at least
vLLM's, in every cell; the exit status says whether all are met.

Without ``--matrix``, one policy and capacity in detail. Each round replays the trace on fresh
managers of the same policy and capacity: natively (``kvcontract.sim.replay``, the contract's
call pattern) and through ``KVContractOffloadingManager`` as vLLM's scheduler calls it
(``on_new_request``, per-key ``lookup``, ``prepare_load``, ``prepare_store`` of the rest,
completions, ``on_request_finished``, ``on_schedule_end``). A third side, "vLLM order",
calls the kvcontract manager directly with the inner calls the adapter makes (the loaded
prefix touched at ``prepare_load``, then every key at ``prepare_store``), so the added time
splits into what vLLM's order costs the manager and what the adapter's own code costs.
A fourth side, "vLLM's manager", is vLLM's own ``CPUOffloadingManager`` under the
same scheduler calls (each key's position recorded before the clock, as the scheduler
does): what a vLLM user's scheduler spends today, against what it spends through the adapter.

Either way the sides go through the trace side by side, a segment of requests at a time, the
side that goes first rotating segment by segment, so all see the same load on the machine;
each segment's keys are built before its clock starts, on every side alike. The garbage
collector is off within a round (collected before it, as ``timeit`` does): its pauses,
which grow with the heap, would land on whichever side happened to allocate. Time is the
CPU time of the replaying thread. The figures are medians over rounds of per-round ratios.

    python tools/bench_vllm_adapter.py --matrix [--also build/venv33/bin/python] [--rounds 5]
    python tools/bench_vllm_adapter.py --pointers [--rounds 7]     (vLLM 0.34: the worker's pointer check per job)
    python tools/bench_vllm_adapter.py [--trace PATH] [--rounds 7] [--segment 500] [--capacity 20000] [--policy lru] [--checks off]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from rich.console import Console
from rich.table import Table
from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager as VLLMCPUOffloadingManager

from kvcontract.contracts import OffloadingManager, OffloadKey, ReqContext
from kvcontract.enforce import configure
from kvcontract.engine_driver.keys import key_chains as contract_key_chains
from kvcontract.engine_driver.orders import SchedulerOrderServer
from kvcontract.integrations.vllm import KVContractOffloadingManager
from kvcontract.integrations.vllm.replay import key_chains, replay_as_scheduler
from kvcontract.managers import CPUOffloadingManager
from kvcontract.sim import ReplayReport, TraceRequest, read_trace, replay
from kvcontract.sim.replay import timed_replay
from kvcontract.sim.shipped import shipped_trace

DEFAULT_TRACE = shipped_trace("mooncake-conversation")
BLOCK_TOKENS = 16
"""Tokens per block in the positions recorded for vLLM's manager (the adapter does not read them)."""
ALL_SIDES = (0, 1, 2, 3)
"""Native, vLLM order, adapter, vLLM's manager."""
ADAPTER, VLLM_MANAGER = 2, 3


Reports = tuple[ReplayReport, ReplayReport, ReplayReport, ReplayReport]
"""Native, vLLM order, adapter, vLLM's manager: each side's segments summed."""


def one_round(
    requests: list[TraceRequest],
    number: int,
    *,
    capacity: int,
    policy: str,
    segment: int,
    sides: Sequence[int] = ALL_SIDES,
) -> Reports:
    """The ``sides``' replays of the whole trace, segment by segment, each summed into one report (empty if not run)."""
    gc.collect()
    gc.disable()
    try:
        return _segments(requests, number, capacity=capacity, policy=policy, segment=segment, sides=sides)
    finally:
        gc.enable()


def _segments(
    requests: list[TraceRequest], number: int, *, capacity: int, policy: str, segment: int, sides: Sequence[int]
) -> Reports:
    native_manager = CPUOffloadingManager(capacity, policy)
    ordered_manager = CPUOffloadingManager(capacity, policy)
    adapter = KVContractOffloadingManager(CPUOffloadingManager(capacity, policy))
    peer = VLLMCPUOffloadingManager(capacity, cache_policy=policy)
    native: list[ReplayReport] = []
    ordered: list[ReplayReport] = []
    adapted: list[ReplayReport] = []
    theirs: list[ReplayReport] = []
    for start in range(0, len(requests), segment):
        part = requests[start : start + segment]
        turn = (number + start // segment) % len(sides)
        for side in (*sides[turn:], *sides[:turn]):
            if side == 0:
                native.append(replay(native_manager, part))
            elif side == 1:
                ordered.append(
                    replay_in_vllm_order(ordered_manager, contract_key_chains(request.hash_ids for request in part))
                )
            elif side == 2:
                adapted.append(replay_as_scheduler(adapter, key_chains([request.hash_ids for request in part])))
            else:
                chains = key_chains([request.hash_ids for request in part])
                theirs.append(replay_as_scheduler(peer, chains, block_tokens=BLOCK_TOKENS))
    return total(native), total(ordered), total(adapted), total(theirs)


def replay_in_vllm_order(manager: OffloadingManager, chains: Sequence[Sequence[OffloadKey]]) -> ReplayReport:
    """``manager`` called directly with the inner calls the adapter makes for vLLM's scheduler, in its order:
    vLLM's order with the adapter's two ``touch`` calls (the prefix at ``prepare_load``, every key at ``prepare_store``)."""
    contexts = [ReqContext(str(number)) for number in range(len(chains))]
    server = SchedulerOrderServer(manager, after_load=manager.touch, after_store=manager.touch)
    return timed_replay(server.serve, chains, contexts)


def total(reports: list[ReplayReport]) -> ReplayReport:
    """The reports of consecutive segments as one."""
    return ReplayReport(
        sum(r.requests for r in reports),
        sum(r.blocks for r in reports),
        sum(r.hit_blocks for r in reports),
        sum(r.failed_stores for r in reports),
        sum(r.evictions for r in reports),
        sum(r.seconds for r in reports),
        sum(r.cpu_seconds for r in reports),
    )


FRACTIONS = (2, 5, 10)
"""Capacities of the matrix, in % of the trace's unique blocks."""
TARGETS = {"lru": 3.0, "arc": 2.0}
"""How many times faster per block than vLLM's own CPU manager kvcontract must be through the adapter."""


@dataclass(frozen=True)
class Cell:
    """One policy and capacity of the matrix on one vLLM release: medians over rounds."""

    release: str
    policy: str
    percent: int
    capacity: int
    speedup: float
    """vLLM's manager's CPU time over the adapter's, the median of the per-round ratios."""
    adapter_us: float
    vllm_us: float
    hit_ratio: float
    vllm_hit_ratio: float


def matrix(requests: list[TraceRequest], *, rounds: int, segment: int) -> list[Cell]:
    """The adapter against vLLM's own manager, lru and arc at each of ``FRACTIONS``, on the installed vLLM."""
    release = metadata.version("vllm")
    unique = len({hash_id for request in requests for hash_id in request.hash_ids})
    cells: list[Cell] = []
    for policy in TARGETS:
        for percent in FRACTIONS:
            capacity = unique * percent // 100
            pairs = [
                one_round(
                    requests, number, capacity=capacity, policy=policy, segment=segment, sides=(ADAPTER, VLLM_MANAGER)
                )
                for number in range(rounds)
            ]
            adapted, theirs = pairs[-1][ADAPTER], pairs[-1][VLLM_MANAGER]
            cells.append(
                Cell(
                    release,
                    policy,
                    percent,
                    capacity,
                    statistics.median(pair[VLLM_MANAGER].cpu_seconds / pair[ADAPTER].cpu_seconds for pair in pairs),
                    statistics.median(pair[ADAPTER].cpu_us_per_block for pair in pairs),
                    statistics.median(pair[VLLM_MANAGER].cpu_us_per_block for pair in pairs),
                    adapted.hit_ratio,
                    theirs.hit_ratio,
                )
            )
    return cells


def matrix_elsewhere(python: str, argv: Sequence[str]) -> list[Cell]:
    """The matrix measured by ``python`` (another venv, another vLLM release), read back as JSON."""
    done = subprocess.run([python, __file__, "--matrix", "--json", *argv], check=True, capture_output=True, text=True)
    return [Cell(**fields) for fields in json.loads(done.stdout.strip().splitlines()[-1])]


def print_matrix(cells: list[Cell]) -> bool:
    """One row per policy and capacity, a column per release; whether every cell meets its targets."""
    releases = sorted({cell.release for cell in cells}, reverse=True)
    table = Table(
        title="kvcontract through the adapter against vLLM's own CPU manager, same scheduler calls (CPU time)"
    )
    table.add_column("policy, capacity")
    for release in releases:
        table.add_column(f"vLLM {release}: faster per block", justify="right")
        table.add_column(f"vLLM {release}: µs/block kvcontract / vLLM", justify="right")
        table.add_column(f"vLLM {release}: hit ratio kvcontract / vLLM", justify="right")
    met = True
    by_key = {(cell.release, cell.policy, cell.percent): cell for cell in cells}
    for policy, target in TARGETS.items():
        for percent in FRACTIONS:
            row = [f"{policy}, {percent}% ({by_key[releases[0], policy, percent].capacity} blocks)"]
            for release in releases:
                cell = by_key[release, policy, percent]
                ok = cell.speedup >= target and cell.hit_ratio >= cell.vllm_hit_ratio
                met &= ok
                row += [
                    f"{cell.speedup:.3f}x (>= {target:g}x{'' if cell.speedup >= target else ': short'})",
                    f"{cell.adapter_us:.2f} / {cell.vllm_us:.2f}",
                    f"{cell.hit_ratio:.4f} / {cell.vllm_hit_ratio:.4f}{'' if cell.hit_ratio >= cell.vllm_hit_ratio else ' (below)'}",
                ]
            table.add_row(*row)
    Console(width=200).print(table)
    return met


POINTER_JOBS = ((1, 32, 4), (1, 32, 64), (2, 32, 16))
"""Jobs of ``--pointers``: KV-cache groups, layer references per group, GPU blocks per group."""


def pointer_costs(rounds: int, repeat: int = 2000) -> None:
    """CPU time per job of turning vLLM 0.34's device pointers into the contract's GPU spec (the check
    included), against turning 0.33's GPU spec into it, on canonical caches of the job's shape."""
    import numpy as np
    import torch
    from vllm.v1.kv_offload.base import CanonicalKVCacheRef, CanonicalKVCaches, CanonicalKVCacheTensor
    from vllm.v1.kv_offload.base import GPULoadStoreSpec as VLLMGPULoadStoreSpec
    from vllm.v1.kv_offload.pointer_utils import resolve_device_pointers

    from kvcontract.integrations.vllm.device_pointers import DevicePointerMap
    from kvcontract.integrations.vllm.worker import _gpu_spec  # pyright: ignore[reportPrivateUsage]  # the 0.33 path, measured

    table = Table(title=f"per job, CPU time, median of {rounds} rounds of {repeat} jobs each")
    for column in (
        "groups x layers x blocks",
        "0.34 pointers: check + map µs",
        "0.33 spec: map µs",
        "added µs",
        "added µs/block",
    ):
        table.add_column(column, justify="right")
    for groups, layers, count in POINTER_JOBS:
        tensors = [CanonicalKVCacheTensor(torch.zeros((256, 64), dtype=torch.int8), 64) for _ in range(groups * layers)]
        refs = [[CanonicalKVCacheRef(g * layers + layer, 64) for layer in range(layers)] for g in range(groups)]
        caches = CanonicalKVCaches(tensors=tensors, group_data_refs=refs)
        ids = np.random.default_rng(0).choice(256, size=groups * count, replace=False)
        spec = VLLMGPULoadStoreSpec(ids.tolist(), [count] * groups, [0] * groups)
        pointers, known = resolve_device_pointers(spec, caches), DevicePointerMap(caches)
        new: list[float] = []
        old: list[float] = []
        for number in range(rounds):
            for side in (number % 2, 1 - number % 2):
                start = time.thread_time()
                for _ in range(repeat):
                    known.gpu_spec(pointers, 4) if side == 0 else _gpu_spec(spec, 4)
                (new if side == 0 else old).append((time.thread_time() - start) / repeat * 1e6)
        added = statistics.median(n - o for n, o in zip(new, old))
        table.add_row(
            f"{groups} x {layers} x {count}",
            f"{statistics.median(new):.1f}",
            f"{statistics.median(old):.1f}",
            f"{added:+.1f}",
            f"{added / (groups * count):+.3f}",
        )
    Console(width=160).print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CPU time the vLLM adapter adds per block on the shipped trace.")
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--segment", type=int, default=500, help="requests per segment, between switches of side")
    parser.add_argument("--capacity", type=int, default=20_000, help="host capacity in offload blocks")
    parser.add_argument("--policy", default="lru")
    parser.add_argument("--checks", choices=("off", "on"), default="off", help="kvcontract's runtime call checks")
    parser.add_argument(
        "--matrix", action="store_true", help="lru and arc at 2, 5 and 10%% against vLLM's manager only"
    )
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="PYTHON",
        help="with --matrix: also measure in this interpreter's venv (another vLLM release), a column each",
    )
    parser.add_argument("--json", action="store_true", help="with --matrix: print the cells as one JSON line")
    parser.add_argument(
        "--pointers", action="store_true", help="the worker's cost per job of checking 0.34's device pointers"
    )
    args = parser.parse_args(argv)
    configure(checks=args.checks == "on")
    if args.pointers:
        pointer_costs(args.rounds)
        return 0
    requests = read_trace(args.trace)
    if args.matrix:
        cells = matrix(requests, rounds=args.rounds, segment=args.segment)
        if args.json:
            print(json.dumps([asdict(cell) for cell in cells]))
            return 0
        shared = [
            "--trace",
            str(args.trace),
            "--rounds",
            str(args.rounds),
            "--segment",
            str(args.segment),
            "--checks",
            args.checks,
        ]
        for python in args.also:
            cells += matrix_elsewhere(python, shared)
        return 0 if print_matrix(cells) else 1
    table = Table(
        title=f"{args.policy}, capacity {args.capacity} blocks, checks {args.checks}, segments of {args.segment}"
    )
    for column in (
        "round",
        "native µs/block",
        "adapter µs/block",
        "added µs/block",
        "ratio",
        "of which vLLM order",
        "of which adapter code",
        "hit ratio",
        "vLLM's manager µs/block",
        "vLLM's / adapter",
        "vLLM's hit ratio",
    ):
        table.add_column(column, justify="right")
    added: list[float] = []
    ratios: list[float] = []
    order_parts: list[float] = []
    code_parts: list[float] = []
    peer_ratios: list[float] = []
    for number in range(args.rounds):
        native, ordered, adapted, theirs = one_round(
            requests, number, capacity=args.capacity, policy=args.policy, segment=args.segment
        )
        if not adapted.hit_blocks == ordered.hit_blocks == native.hit_blocks:
            print(
                f"hit blocks differ: adapter {adapted.hit_blocks}, vLLM order {ordered.hit_blocks}, native {native.hit_blocks}",
                file=sys.stderr,
            )
        extra = adapted.cpu_us_per_block - native.cpu_us_per_block
        added.append(extra)
        ratios.append(adapted.cpu_seconds / native.cpu_seconds)
        order_parts.append(ordered.cpu_us_per_block - native.cpu_us_per_block)
        code_parts.append(adapted.cpu_us_per_block - ordered.cpu_us_per_block)
        peer_ratios.append(theirs.cpu_seconds / adapted.cpu_seconds)
        table.add_row(
            str(number + 1),
            f"{native.cpu_us_per_block:.3f}",
            f"{adapted.cpu_us_per_block:.3f}",
            f"{extra:+.3f}",
            f"{ratios[-1]:.3f}",
            f"{order_parts[-1]:+.3f}",
            f"{code_parts[-1]:+.3f}",
            f"{native.hit_ratio:.4f} / {adapted.hit_ratio:.4f}",
            f"{theirs.cpu_us_per_block:.3f}",
            f"{peer_ratios[-1]:.2f}",
            f"{theirs.hit_ratio:.4f}",
        )
    console = Console(width=200)
    console.print(table)
    median = statistics.median(added)
    console.print(f"median ratio adapter/native: {statistics.median(ratios):.3f}")
    console.print(
        f"median added CPU time: {median:+.3f} µs/block; "
        f"of which vLLM's call order in the manager {statistics.median(order_parts):+.3f}, "
        f"the adapter's own code {statistics.median(code_parts):+.3f} (medians of each)"
    )
    console.print(
        f"median ratio vLLM's own manager / kvcontract through the adapter: {statistics.median(peer_ratios):.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
