"""What metrics cost the scheduler: replay CPU time per block without a collector and with one.

Each round replays the trace's first ``--requests`` requests through two fresh LRU
managers, one with no collector and one with a collector over it read every
``--scrape-every`` requests (as a Prometheus scrape would); they take each chunk of that
many requests in turn, in alternating order, so the machine's load falls on both alike.
The garbage collector is off within a round, since its pauses were the largest noise. The
time is the replaying thread's CPU time, the scrape's included; the figure is the median
of the per-round ratios with/without.

    python tools/bench_metrics.py [--rounds 11] [--requests 6000] [--scrape-every 500]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from kvcontract.enforce import configure
from kvcontract.managers import CPUOffloadingManager
from kvcontract.metrics import MetricsCollector, manager_source
from kvcontract.sim import read_trace, replay
from kvcontract.sim.shipped import shipped_trace

DEFAULT_TRACE = shipped_trace("mooncake-conversation")
CAPACITY = 3_655
"""2 % of the trace's unique blocks."""


def one_round(chunks: Sequence[Sequence[Sequence[int]]], metered_first: bool) -> tuple[float, float]:
    """CPU µs per block without and with a collector: two fresh managers take each chunk in turn."""
    managers = {metered: CPUOffloadingManager(CAPACITY, "lru") for metered in (metered_first, not metered_first)}
    collector = MetricsCollector()
    collector.add(manager_source(managers[True], policy="lru"))
    cpu = dict.fromkeys(managers, 0.0)
    blocks = 0
    for index, chunk in enumerate(chunks):
        for metered in (False, True) if index % 2 == 0 else (True, False):
            report = replay(managers[metered], chunk)
            cpu[metered] += report.cpu_seconds
            if metered:
                start = time.thread_time()
                collector.collect()
                cpu[metered] += time.thread_time() - start
        blocks += sum(map(len, chunk))
    return cpu[False] * 1e6 / blocks, cpu[True] * 1e6 / blocks


def main() -> None:
    parser = argparse.ArgumentParser(description="Replay CPU time per block without and with a metrics collector.")
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--requests", type=int, default=6_000)
    parser.add_argument("--scrape-every", type=int, default=500)
    args = parser.parse_args()
    configure(checks=False)
    requests = [request.hash_ids for request in read_trace(args.trace)][: args.requests]
    chunks = [requests[i : i + args.scrape_every] for i in range(0, len(requests), args.scrape_every)]
    ratios: list[float] = []
    for index in range(args.rounds):
        gc.collect()
        gc.disable()
        try:
            off, on = one_round(chunks, metered_first=index % 2 == 1)
        finally:
            gc.enable()
        ratios.append(on / off)
        print(f"round {index}: off {off:.3f} µs/block, on {on:.3f} µs/block, on/off {ratios[-1]:.3f}")
    print(f"median on/off {statistics.median(ratios):.3f} (rounds {min(ratios):.3f}..{max(ratios):.3f})")


if __name__ == "__main__":
    main()
