"""Hit ratio and manager time per block of every policy on the Mooncake conversation trace.

Replays the trace through ``CPUOffloadingManager`` at 2%, 5% and 10% of its unique
blocks, with the runtime contract checks off and on, and prints one table with the
offline optimum (Belady, from the trace's README) for comparison.

Time is the CPU time of the replaying thread, so other processes on the machine do
not count. The trace is replayed in segments of ``--segment`` requests through the same
manager; each segment keeps its fastest of ``--repeats`` runs, and the per-block figure
is the sum of those over all blocks. A reference loop's speed is printed with the table:
figures from a loaded machine are slower by about the same factor.

    python tools/bench_manager.py [--trace PATH] [--repeats 3] [--policies lru,arc]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kvcontract.enforce import configure
from kvcontract.managers import CPUOffloadingManager
from kvcontract.policies import available_policies
from kvcontract.sim import TraceRequest, read_trace, replay

DEFAULT_TRACE = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces" / "conversation_trace.jsonl"
UNIQUE_BLOCKS = 182_790
"""Unique blocks of the conversation trace; capacities are fractions of it."""
FRACTIONS = (0.02, 0.05, 0.10)
OPTIMUM = {0.02: 0.311, 0.05: 0.366, 0.10: 0.366}
"""Offline optimum (Belady) hit ratios at those capacities, from the trace's README."""
BUILT_IN = ("lru", "arc", "s3fifo", "sieve", "prefix_reuse")


@dataclass(frozen=True)
class Measurement:
    """One policy at one capacity: its hit ratio and manager time per block, checks off and on."""

    hit_ratio: float
    us_off: float
    us_on: float


def measure(
    policy: str, capacity: int, segments: Sequence[Sequence[TraceRequest]], repeats: int
) -> Measurement:
    """Replay ``segments`` in order through one manager per run, checks off then on, ``repeats`` times.

    Alternating the two modes lets both see the same load on the machine; each segment
    keeps its fastest run in each mode.
    """
    best: dict[bool, list[float]] = {}
    hit_ratios: set[float] = set()
    blocks = sum(len(request.hash_ids) for segment in segments for request in segment)
    for _ in range(repeats):
        for checks in (False, True):
            configure(checks=checks)
            manager = CPUOffloadingManager(capacity, policy)
            reports = [replay(manager, segment) for segment in segments]
            times = [report.cpu_seconds for report in reports]
            best[checks] = [min(pair) for pair in zip(best.get(checks, times), times)]
            hit_ratios.add(sum(report.hit_blocks for report in reports) / blocks)
    configure(checks=True)
    if len(hit_ratios) != 1:
        raise RuntimeError(f"{policy}: hit ratios differ between runs or check modes: {sorted(hit_ratios)}")
    return Measurement(hit_ratios.pop(), sum(best[False]) * 1e6 / blocks, sum(best[True]) * 1e6 / blocks)


def reference_ns() -> float:
    """Nanoseconds per iteration of a dict-lookup loop: how fast this machine runs Python now."""
    table = {number: number for number in range(1000)}
    best = float("inf")
    for _ in range(5):
        start = time.thread_time()
        for _ in range(200):
            for number in range(1000):
                table.get(number)
        best = min(best, (time.thread_time() - start) / 200_000 * 1e9)
    return best


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description="Hit ratio and manager time per block of every policy.")
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="Mooncake-format JSONL trace")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (default 3)")
    parser.add_argument("--segment", type=int, default=1000, help="requests per timed segment (default 1000)")
    parser.add_argument("--policies", default=",".join(BUILT_IN), help="comma-separated policy names")
    options = parser.parse_args(argv)
    policies = [name.strip() for name in options.policies.split(",") if name.strip()]
    unknown = sorted(set(policies) - set(available_policies()))
    if unknown or options.repeats < 1 or options.segment < 1:
        parser.error(
            f"unknown policies {unknown} (known: {', '.join(available_policies())})"
            if unknown
            else "--repeats and --segment must be at least 1"
        )
    requests = read_trace(options.trace)
    segments = [requests[i : i + options.segment] for i in range(0, len(requests), options.segment)]
    console = Console(width=112)
    results: dict[tuple[str, float], Measurement] = {}
    with console.status("replaying") as status:
        for policy in policies:
            for fraction in FRACTIONS:
                status.update(f"{policy} at {fraction:.0%}")
                capacity = round(UNIQUE_BLOCKS * fraction)
                results[policy, fraction] = measure(policy, capacity, segments, options.repeats)
    table = Table(
        title=(
            f"Manager replay of {options.trace.name}: {len(requests):,} requests, "
            f"{sum(len(r.hash_ids) for r in requests):,} blocks"
        ),
        caption=(
            f"µs/block: CPU time per requested block, best of {options.repeats} runs per "
            f"{options.segment}-request segment. Reference loop now: {reference_ns():.0f} ns per iteration."
        ),
    )
    for column in ("policy", "capacity", "hit ratio", "µs/block checks off", "µs/block checks on", "on / off"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for policy in policies:
        for fraction in FRACTIONS:
            result = results[policy, fraction]
            table.add_row(
                policy,
                f"{fraction:.0%} ({round(UNIQUE_BLOCKS * fraction):,})",
                f"{result.hit_ratio:.4f}",
                f"{result.us_off:.2f}",
                f"{result.us_on:.2f}",
                f"{result.us_on / result.us_off:.2f}x",
            )
        table.add_section()
    for fraction in FRACTIONS:
        table.add_row("offline optimum", f"{fraction:.0%}", f"{OPTIMUM[fraction]:.3f}", "", "", "")
    console.print(table)


if __name__ == "__main__":
    main()
