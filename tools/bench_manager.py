"""Hit ratio and manager time per block of every policy on the Mooncake conversation trace.

Replays the trace through ``CPUOffloadingManager`` at 2%, 5% and 10% of its unique
blocks, with the runtime contract checks off and on, and prints one table with the
offline optimum (Belady, from the trace's README) for comparison.

Time is the CPU time of the replaying thread, so other processes on the machine do
not count. The trace is replayed in segments of ``--segment`` requests through the same
manager; each segment keeps its fastest of ``--repeats`` runs, and the per-block figure
is the sum of those over all blocks. A reference loop's speed is printed with the table:
figures from a loaded machine are slower by about the same factor.

With ``--peer`` (needs vLLM, extra ``vllm``), vLLM's own ``CPUOffloadingManager`` (its
``lru`` and ``arc``, store threshold 1) replays the same trace through the same loop as
a peer column: each round replays the whole trace through a fresh kvcontract manager
(checks off) and then a fresh vLLM manager, the CPU time of each is taken, and the table
shows the median of the per-round ratios vLLM / kvcontract. vLLM's scheduler records
each key's end-token position on the request context; the peer loop does the same
before it starts the clock.

    python tools/bench_manager.py [--trace PATH] [--repeats 3] [--policies lru,arc] [--peer --rounds 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kvcontract.enforce import configure
from kvcontract.engine_driver.keys import key_chains
from kvcontract.engine_driver.orders import RequestServer
from kvcontract.managers import CPUOffloadingManager
from kvcontract.policies import available_policies
from kvcontract.sim import TraceRequest, read_trace, replay
from kvcontract.sim.shipped import shipped_trace

DEFAULT_TRACE = shipped_trace("mooncake-conversation")
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


def measure(policy: str, capacity: int, segments: Sequence[Sequence[TraceRequest]], repeats: int) -> Measurement:
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


@dataclass(frozen=True)
class PeerMeasurement:
    """kvcontract against vLLM's manager, same policy and capacity: CPU µs per block and hit ratios."""

    us_kvcontract: float
    us_vllm: float
    median_ratio: float
    hit_ratio_kvcontract: float
    hit_ratio_vllm: float


BLOCK_TOKENS = 16
"""Tokens per block in the positions the peer loop records, as vLLM's scheduler would."""


def replay_vllm(manager: Any, chains: Sequence[Sequence[bytes]], contexts: Sequence[Any]) -> tuple[int, float]:
    """kvcontract's order (``kvcontract.engine_driver``) over vLLM's manager: hit blocks and CPU seconds.

    vLLM 0.33's manager has ``touch`` and the driver calls it; 0.34 removed it and commits
    recency at ``on_request_finished``.
    """
    from vllm.v1.kv_offload.base import LookupResult

    serve = RequestServer(manager, hit=LookupResult.HIT, begin=manager.on_new_request).serve
    hit_blocks = 0
    start = time.thread_time()
    for keys, context in zip(chains, contexts):
        hit_blocks += serve(keys, context).found
    return hit_blocks, time.thread_time() - start


def measure_peer(policy: str, capacity: int, requests: Sequence[TraceRequest], rounds: int) -> PeerMeasurement:
    """Interleave kvcontract (checks off) and vLLM replays of the whole trace, ``rounds`` times each."""
    from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager as VLLMManager

    from kvcontract.integrations.vllm.keys import as_vllm_keys
    from kvcontract.integrations.vllm.replay import request_contexts

    chains = key_chains(request.hash_ids for request in requests)
    blocks = sum(map(len, chains))
    ours: list[float] = []
    theirs: list[float] = []
    hits: dict[str, set[int]] = {"kvcontract": set(), "vllm": set()}
    configure(checks=False)
    try:
        for _ in range(rounds):
            report = replay(CPUOffloadingManager(capacity, policy), requests)
            ours.append(report.cpu_seconds)
            hits["kvcontract"].add(report.hit_blocks)
            contexts = request_contexts([as_vllm_keys(keys) for keys in chains], block_tokens=BLOCK_TOKENS)
            hit_blocks, seconds = replay_vllm(VLLMManager(capacity, cache_policy=policy), chains, contexts)
            theirs.append(seconds)
            hits["vllm"].add(hit_blocks)
    finally:
        configure(checks=True)
    if any(len(counts) != 1 for counts in hits.values()):
        raise RuntimeError(f"{policy}: hit counts differ between rounds: {hits}")
    return PeerMeasurement(
        us_kvcontract=statistics.median(ours) * 1e6 / blocks,
        us_vllm=statistics.median(theirs) * 1e6 / blocks,
        median_ratio=statistics.median(t / o for t, o in zip(theirs, ours)),
        hit_ratio_kvcontract=hits["kvcontract"].pop() / blocks,
        hit_ratio_vllm=hits["vllm"].pop() / blocks,
    )


def print_peer_table(console: Console, results: dict[tuple[str, float], PeerMeasurement], rounds: int) -> None:
    """The peer comparison: per policy and capacity, both managers' µs/block and the median ratio."""
    table = Table(
        title=f"kvcontract against vLLM {metadata.version('vllm')}'s CPUOffloadingManager (same loop, checks off)",
        caption=f"µs/block: median CPU time per requested block over {rounds} interleaved rounds; ratio: median per-round vLLM / kvcontract.",
    )
    for column in (
        "policy",
        "capacity",
        "kvcontract µs/block",
        "vLLM µs/block",
        "vLLM / kvcontract",
        "hit kvcontract",
        "hit vLLM",
    ):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for (policy, fraction), result in results.items():
        table.add_row(
            policy,
            f"{fraction:.0%}",
            f"{result.us_kvcontract:.2f}",
            f"{result.us_vllm:.2f}",
            f"{result.median_ratio:.2f}x",
            f"{result.hit_ratio_kvcontract:.4f}",
            f"{result.hit_ratio_vllm:.4f}",
        )
    console.print(table)


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
    parser.add_argument(
        "--peer", action="store_true", help="also replay vLLM's own manager (lru, arc) as a peer column"
    )
    parser.add_argument("--peer-only", action="store_true", help="print only the peer comparison")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the peer comparison (default 5)")
    options = parser.parse_args(argv)
    if (options.peer or options.peer_only) and importlib.util.find_spec("vllm") is None:
        sys.exit("--peer needs vLLM: pip install 'kvcontract[vllm]'")
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
    if options.peer or options.peer_only:
        peers: dict[tuple[str, float], PeerMeasurement] = {}
        with console.status("replaying against vLLM") as status:
            for policy in [name for name in policies if name in ("lru", "arc")]:
                for fraction in FRACTIONS:
                    status.update(f"{policy} at {fraction:.0%} against vLLM")
                    peers[policy, fraction] = measure_peer(
                        policy, round(UNIQUE_BLOCKS * fraction), requests, options.rounds
                    )
        print_peer_table(console, peers, options.rounds)
        if options.peer_only:
            return
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
