"""Planner speed and SHARDS accuracy on a trace.

Speed: LRU's whole curve at 100 capacities (one pass of stack distances) against single
replays of an LRU manager at one capacity, CPU time of this thread, interleaved round by
round; the figure is the median of the per-round ratios (target: at most 3). Accuracy: the
SHARDS curve at each sampling rate against the exact one over the same 100 capacities,
largest and mean absolute error per seed, for one sample and for the mean of ``--samples``
independently salted ones as the planner computes it (target at 1 %: within 0.01), with the
standard error the planner reports and the CPU time relative to one exact pass.

    python tools/bench_plan.py [--trace T] [--rounds 5] [--rates 0.01,0.1] [--seeds 5] [--samples 4]
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
from kvcontract.plan.grid import parse_capacity_grid
from kvcontract.plan.stack_distance import lru_hit_curve, shards_hit_curves
from kvcontract.sim import read_trace, replay
from kvcontract.sim.shipped import shipped_trace

TRACE = shipped_trace("mooncake-conversation")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rates", default="0.01,0.1")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=4)
    options = parser.parse_args()
    configure(checks=False)
    requests = [request.hash_ids for request in read_trace(options.trace)]
    unique = len({hash_id for request in requests for hash_id in request})
    grid = parse_capacity_grid("1%..50%", unique_blocks=unique, block_bytes=None, points=100)
    replay_capacity = grid[len(grid) // 2]
    ratios: list[float] = []
    exact_seconds: list[float] = []
    exact = np.zeros(len(grid))
    for _ in range(options.rounds):
        start = time.thread_time()
        curve = lru_hit_curve(requests)
        exact = np.array([curve.hit_ratio(capacity) for capacity in grid])
        curve_seconds = time.thread_time() - start
        exact_seconds.append(curve_seconds)
        start = time.thread_time()
        replay(CPUOffloadingManager(replay_capacity, "lru"), requests)
        replay_seconds = time.thread_time() - start
        ratios.append(curve_seconds / replay_seconds)
        print(f"round: curve {curve_seconds:.3f} s, one replay {replay_seconds:.3f} s, ratio {ratios[-1]:.2f}")
    console = Console()
    console.print(
        f"LRU curve at {len(grid)} capacities / one replay: median {statistics.median(ratios):.2f} (target <= 3)"
    )
    one_pass = statistics.median(exact_seconds)
    title = f"SHARDS against the exact LRU curve ({len(grid)} capacities, 1%..50% of unique blocks)"
    table = Table(title=title)
    columns = ("rate", "seed", "samples", "max abs error", "mean abs error", "reported std error", "CPU / exact pass")
    for column in columns:
        table.add_column(column, justify="right")
    for rate in (float(text) for text in options.rates.split(",")):
        for seed in range(options.seeds):
            for count in sorted({1, options.samples}):
                seeds = range(seed * options.samples, seed * options.samples + count)
                start = time.thread_time()
                sampled = shards_hit_curves(requests, rate, seeds)
                seconds = time.thread_time() - start
                curves = np.array([[curve.hit_ratio(capacity) for capacity in grid] for curve in sampled])
                errors = np.abs(curves.mean(axis=0) - exact)
                spread = f"{curves.std(axis=0, ddof=1).max() / count**0.5:.4f}" if count > 1 else "-"
                cells = (f"{errors.max():.4f}", f"{errors.mean():.4f}", spread, f"{seconds / one_pass:.2f}")
                table.add_row(f"{rate:.2%}", str(seed), str(count), *cells)
    console.print(table)


if __name__ == "__main__":
    main()
