"""Planner speed and SHARDS accuracy on a trace.

Speed: LRU's whole curve at 100 capacities (one pass of stack distances) against single
replays of an LRU manager at one capacity, CPU time of this thread, interleaved round by
round; the figure is the median of the per-round ratios (target: at most 3). Accuracy: the
SHARDS curve at each sampling rate against the exact one over the same 100 capacities,
largest and mean absolute error per seed (target at 1 %: within 0.01).

    python tools/bench_plan.py [--trace T] [--rounds 5] [--rates 0.01,0.1] [--seeds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from kvcontract.enforce import configure
from kvcontract.managers import CPUOffloadingManager
from kvcontract.sim import read_trace, replay
from kvcontract.sim.plan_grid import parse_capacity_grid
from kvcontract.sim.stack_distance import lru_hit_curve, shards_hit_curve

TRACE = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces" / "conversation_trace.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rates", default="0.01,0.1")
    parser.add_argument("--seeds", type=int, default=5)
    options = parser.parse_args()
    configure(checks=False)
    requests = [request.hash_ids for request in read_trace(options.trace)]
    unique = len({hash_id for request in requests for hash_id in request})
    grid = parse_capacity_grid("1%..50%", unique_blocks=unique, block_bytes=None, points=100)
    replay_capacity = grid[len(grid) // 2]
    ratios: list[float] = []
    for _ in range(options.rounds):
        start = time.thread_time()
        curve = lru_hit_curve(requests)
        exact = np.array([curve.hit_ratio(capacity) for capacity in grid])
        curve_seconds = time.thread_time() - start
        start = time.thread_time()
        replay(CPUOffloadingManager(replay_capacity, "lru"), requests)
        replay_seconds = time.thread_time() - start
        ratios.append(curve_seconds / replay_seconds)
        print(f"round: curve {curve_seconds:.3f} s, one replay {replay_seconds:.3f} s, ratio {ratios[-1]:.2f}")
    console = Console()
    console.print(f"LRU curve at {len(grid)} capacities / one replay: median {statistics.median(ratios):.2f} (target <= 3)")
    table = Table(title="SHARDS against the exact LRU curve (100 capacities, 1%..50% of unique blocks)")
    for column in ("rate", "seed", "max abs error", "mean abs error", "CPU s"):
        table.add_column(column, justify="right")
    for rate in (float(text) for text in options.rates.split(",")):
        for seed in range(options.seeds):
            start = time.thread_time()
            sampled = shards_hit_curve(requests, rate, seed=seed)
            seconds = time.thread_time() - start
            errors = np.abs(np.array([sampled.hit_ratio(capacity) for capacity in grid]) - exact)
            table.add_row(f"{rate:.2%}", str(seed), f"{errors.max():.4f}", f"{errors.mean():.4f}", f"{seconds:.2f}")
    console.print(table)


if __name__ == "__main__":
    main()
