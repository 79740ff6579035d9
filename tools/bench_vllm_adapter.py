"""CPU time the vLLM adapter adds per block on the shared trace, against kvcontract's native manager.

Each round replays the trace twice on fresh managers of the same policy and capacity:
natively (``kvcontract.sim.replay``, the contract's call pattern) and through
``KVContractOffloadingManager`` as vLLM 0.33's scheduler calls it (``replay_as_scheduler``:
``on_new_request``, per-key ``lookup``, ``prepare_load``, ``prepare_store`` of the rest,
completions, recency committed in ``on_request_finished``). The order alternates round by
round so both see the same load on the machine. Time is the CPU time of the replaying
thread; the figure is the median over rounds of (adapter - native) per requested block.
Hit ratios must match (LRU); the target is an added 0.3 µs per block at most.

    python tools/bench_vllm_adapter.py [--trace PATH] [--rounds 7] [--capacity 20000] [--checks off]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kvcontract.enforce import configure
from kvcontract.integrations.vllm import KVContractOffloadingManager
from kvcontract.integrations.vllm.replay import key_chains, replay_as_scheduler
from kvcontract.managers import CPUOffloadingManager
from kvcontract.sim import ReplayReport, read_trace, replay

DEFAULT_TRACE = Path("/work/shared/traces/conversation_trace.jsonl")
TARGET_US = 0.3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CPU time the vLLM adapter adds per block on the shared trace.")
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--capacity", type=int, default=20_000, help="host capacity in offload blocks")
    parser.add_argument("--policy", default="lru")
    parser.add_argument("--checks", choices=("off", "on"), default="off", help="kvcontract's runtime call checks")
    args = parser.parse_args(argv)
    configure(checks=args.checks == "on")
    requests = read_trace(args.trace)
    chains = key_chains([request.hash_ids for request in requests])
    table = Table(title=f"{args.policy}, capacity {args.capacity} blocks, checks {args.checks}")
    for column in ("round", "native µs/block", "adapter µs/block", "added µs/block", "hit ratio"):
        table.add_column(column, justify="right")
    added: list[float] = []
    for number in range(args.rounds):
        native: ReplayReport | None = None
        adapted: ReplayReport | None = None
        for adapter_turn in (number % 2 == 1, number % 2 == 0):
            inner = CPUOffloadingManager(args.capacity, args.policy)
            if adapter_turn:
                adapted = replay_as_scheduler(KVContractOffloadingManager(inner), chains)
            else:
                native = replay(inner, requests)
        assert native is not None and adapted is not None
        if adapted.hit_blocks != native.hit_blocks:
            print(f"hit blocks differ: adapter {adapted.hit_blocks}, native {native.hit_blocks}", file=sys.stderr)
        extra = adapted.cpu_us_per_block - native.cpu_us_per_block
        added.append(extra)
        table.add_row(
            str(number + 1),
            f"{native.cpu_us_per_block:.3f}",
            f"{adapted.cpu_us_per_block:.3f}",
            f"{extra:+.3f}",
            f"{native.hit_ratio:.4f} / {adapted.hit_ratio:.4f}",
        )
    console = Console()
    console.print(table)
    median = statistics.median(added)
    verdict = "meets" if median <= TARGET_US else "misses"
    console.print(f"median added CPU time: {median:+.3f} µs/block ({verdict} the {TARGET_US} µs target)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
