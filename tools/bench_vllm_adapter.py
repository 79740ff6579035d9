"""CPU time the vLLM adapter adds per block on the shared trace, against kvcontract's native manager.

Each round replays the trace on two fresh managers of the same policy and capacity:
natively (``kvcontract.sim.replay``, the contract's call pattern) and through
``KVContractOffloadingManager`` as vLLM 0.33's scheduler calls it (``replay_as_scheduler``:
``on_new_request``, per-key ``lookup``, ``prepare_load``, ``prepare_store`` of the rest,
completions, ``on_request_finished``, ``on_schedule_end``). The two go through the trace
side by side, a segment of requests at a time, the side that goes first alternating
segment by segment, so both see the same load on the machine; each segment's keys are
built before its clock starts, on both sides alike. The garbage collector is off within a
round (collected before it, as ``timeit`` does): its pauses, which grow with the heap, would
land on whichever side happened to allocate. Time is the CPU time of the replaying thread. The figures are medians over rounds of the adapter's time over the native one
(ratio) and of the difference per requested block. Hit ratios must match (LRU); the target
is an added 0.3 µs per block at most.

    python tools/bench_vllm_adapter.py [--trace PATH] [--rounds 7] [--segment 500] [--capacity 20000] [--checks off]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kvcontract.enforce import configure
from kvcontract.integrations.vllm import KVContractOffloadingManager
from kvcontract.integrations.vllm.replay import key_chains, replay_as_scheduler
from kvcontract.managers import CPUOffloadingManager
from kvcontract.sim import ReplayReport, TraceRequest, read_trace, replay


DEFAULT_TRACE = Path("/work/shared/traces/conversation_trace.jsonl")
TARGET_US = 0.3


def one_round(
    requests: list[TraceRequest], number: int, *, capacity: int, policy: str, segment: int
) -> tuple[ReplayReport, ReplayReport]:
    """The native and the adapter's replay of the whole trace, segment by segment, each summed into one report."""
    gc.collect()
    gc.disable()
    try:
        return _segments(requests, number, capacity=capacity, policy=policy, segment=segment)
    finally:
        gc.enable()


def _segments(
    requests: list[TraceRequest], number: int, *, capacity: int, policy: str, segment: int
) -> tuple[ReplayReport, ReplayReport]:
    native_manager = CPUOffloadingManager(capacity, policy)
    adapter = KVContractOffloadingManager(CPUOffloadingManager(capacity, policy))
    native: list[ReplayReport] = []
    adapted: list[ReplayReport] = []
    for start in range(0, len(requests), segment):
        part = requests[start : start + segment]
        adapter_first = (number + start // segment) % 2 == 0
        for adapter_turn in (adapter_first, not adapter_first):
            if adapter_turn:
                adapted.append(replay_as_scheduler(adapter, key_chains([request.hash_ids for request in part])))
            else:
                native.append(replay(native_manager, part))
    return total(native), total(adapted)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CPU time the vLLM adapter adds per block on the shared trace.")
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--segment", type=int, default=500, help="requests per segment, between switches of side")
    parser.add_argument("--capacity", type=int, default=20_000, help="host capacity in offload blocks")
    parser.add_argument("--policy", default="lru")
    parser.add_argument("--checks", choices=("off", "on"), default="off", help="kvcontract's runtime call checks")
    args = parser.parse_args(argv)
    configure(checks=args.checks == "on")
    requests = read_trace(args.trace)
    table = Table(title=f"{args.policy}, capacity {args.capacity} blocks, checks {args.checks}, segments of {args.segment}")
    for column in ("round", "native µs/block", "adapter µs/block", "added µs/block", "ratio", "hit ratio"):
        table.add_column(column, justify="right")
    added: list[float] = []
    ratios: list[float] = []
    for number in range(args.rounds):
        native, adapted = one_round(requests, number, capacity=args.capacity, policy=args.policy, segment=args.segment)
        if adapted.hit_blocks != native.hit_blocks:
            print(f"hit blocks differ: adapter {adapted.hit_blocks}, native {native.hit_blocks}", file=sys.stderr)
        extra = adapted.cpu_us_per_block - native.cpu_us_per_block
        added.append(extra)
        ratios.append(adapted.cpu_seconds / native.cpu_seconds)
        table.add_row(
            str(number + 1),
            f"{native.cpu_us_per_block:.3f}",
            f"{adapted.cpu_us_per_block:.3f}",
            f"{extra:+.3f}",
            f"{ratios[-1]:.3f}",
            f"{native.hit_ratio:.4f} / {adapted.hit_ratio:.4f}",
        )
    console = Console()
    console.print(table)
    median = statistics.median(added)
    verdict = "meets" if median <= TARGET_US else "misses"
    console.print(f"median ratio adapter/native: {statistics.median(ratios):.3f}")
    console.print(f"median added CPU time: {median:+.3f} µs/block ({verdict} the {TARGET_US} µs target)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
