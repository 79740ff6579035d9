"""The live what-if against independent replays: its accuracy, its CPU cost per block, its memory.

``python tools/bench_whatif.py`` runs, for the shipped trace and two generated shapes
(``tools/trace_shapes.py``), a primary of 2 % of the trace's unique blocks (LRU):

- accuracy: each what-if figure (0.5x, 2x, 4x capacity; every built-in policy) at
  ``--rate`` (and at 1.0) against an independent replay of that capacity or policy
  (:func:`kvcontract.sim.replay`), with the sampling error the observer reports beside it,
  and over ``--salts`` other samples (hash salts): the mean difference (bias), its spread,
  the mean reported error, and how often the difference was within twice the reported error;
- cost: the replay of the primary alone and the same replay with the observer fed each
  request, interleaved round by round, CPU time of this thread; the median of the per-round
  differences per block;
- memory: blocks the shadows may hold against the primary's capacity, and the bytes both
  allocate (tracemalloc) over the run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kvcontract.config import BUILTIN_POLICIES, WhatIfConfig
from kvcontract.contracts import OffloadKey, ReqContext
from kvcontract.enforce import configure
from kvcontract.engine_driver.orders import RequestServer
from kvcontract.managers import CPUOffloadingManager
from kvcontract.observe import WhatIfFigure, WhatIfObserver, WhatIfReport
from kvcontract.observe.whatif import SALT
from kvcontract.sim import block_key, read_trace, replay
from kvcontract.sim.shipped import shipped_trace

sys.path.insert(0, str(Path(__file__).parent))
from trace_shapes import SHAPES  # the sibling tool, importable once its folder is on the path

TRACE = shipped_trace("mooncake-conversation")
_MULTIPLES = (0.5, 2.0, 4.0)


def traces(trace: Path) -> dict[str, list[list[int]]]:
    """The shipped trace and two generated shapes of other structure."""
    shared = [list(request.hash_ids) for request in read_trace(trace)]
    return {
        "conversation (shared)": shared,
        "shared_prefixes": SHAPES["shared_prefixes"](0),
        "agent_loops": SHAPES["agent_loops"](0),
    }


def observed(requests: Sequence[Sequence[OffloadKey]], capacity: int, rate: float, salt: int = SALT) -> WhatIfReport:
    config = WhatIfConfig(capacities=list(_MULTIPLES), sample_rate=rate)
    observer = WhatIfObserver(capacity, "lru", config, salt=salt)
    for keys in requests:
        observer.observe(keys)
    return observer.report()


def _figures(report: WhatIfReport) -> dict[str, WhatIfFigure]:
    return {f"{m:g}x": report.capacity[m] for m in _MULTIPLES} | report.policy


def accuracy(name: str, requests: list[list[int]], rate: float, salts: int, console: Console) -> None:
    unique = len({hash_id for request in requests for hash_id in request})
    capacity = max(1, unique // 50)
    truth = {
        f"{m:g}x": replay(CPUOffloadingManager(max(1, round(capacity * m)), "lru"), requests).hit_ratio
        for m in _MULTIPLES
    }
    truth |= {p: replay(CPUOffloadingManager(capacity, p), requests).hit_ratio for p in BUILTIN_POLICIES}
    chains = [[block_key(hash_id) for hash_id in request] for request in requests]
    exact, sampled = _figures(observed(chains, capacity, 1.0)), observed(chains, capacity, rate)
    drawn = [_figures(observed(chains, capacity, rate, SALT + salt)) for salt in range(1, salts + 1)]
    table = Table(
        title=f"{name}: primary {capacity} blocks (2 % of {unique:,} unique), LRU, rate used {sampled.sample_rate:.3g}"
    )
    columns = (
        "what-if",
        "replay",
        "rate 1.0",
        "sampled",
        "error",
        "reported",
        f"bias ({salts} salts)",
        "spread",
        "reported",
        "|e|<=2 rep",
        "|e|<=0.01",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "what-if" else "right")
    for label, figure in _figures(sampled).items():
        errors = [other[label].run - truth[label] for other in drawn]
        reported = [other[label].error for other in drawn]
        table.add_row(
            label,
            f"{truth[label]:.4f}",
            f"{exact[label].run:.4f}",
            f"{figure.run:.4f}",
            f"{figure.run - truth[label]:+.4f}",
            f"{figure.error:.4f}",
            f"{statistics.mean(errors):+.4f}",
            f"{statistics.pstdev(errors):.4f}",
            f"{statistics.mean(reported):.4f}",
            f"{sum(abs(e) <= 2 * r for e, r in zip(errors, reported))}/{salts}",
            f"{sum(abs(e) <= 0.01 for e in errors)}/{salts}",
        )
    console.print(table)


def cost(requests: list[list[int]], rate: float, rounds: int, console: Console) -> None:
    unique = len({hash_id for request in requests for hash_id in request})
    capacity = max(1, unique // 50)
    chains = [[block_key(hash_id) for hash_id in request] for request in requests]
    blocks = sum(map(len, chains))
    configure(checks=False)
    differences: list[float] = []
    for _ in range(rounds):
        alone = _cpu_seconds(chains, capacity, None)
        observer = WhatIfObserver(capacity, "lru", WhatIfConfig(capacities=list(_MULTIPLES), sample_rate=rate))
        with_observer = _cpu_seconds(chains, capacity, observer)
        differences.append((with_observer - alone) / blocks * 1e6)
    console.print(
        f"cost at rate {rate:g}: median {statistics.median(differences):+.3f} µs per block added to the "
        f"manager's CPU time (rounds: {', '.join(f'{d:+.3f}' for d in differences)})"
    )
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    primary = CPUOffloadingManager(capacity, "lru")
    server = RequestServer(primary)
    for number, keys in enumerate(chains):
        server.serve(keys, ReqContext(str(number)))
    middle = tracemalloc.take_snapshot()
    observer = WhatIfObserver(capacity, "lru", WhatIfConfig(capacities=list(_MULTIPLES), sample_rate=rate))
    for keys in chains:
        observer.observe(keys)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    primary_bytes = sum(stat.size_diff for stat in middle.compare_to(before, "filename"))
    observer_bytes = sum(stat.size_diff for stat in after.compare_to(middle, "filename"))
    report = observer.report()
    console.print(
        f"memory at rate {rate:g}: shadows hold up to {report.shadow_blocks:,} blocks against the primary's "
        f"{capacity:,} ({report.shadow_blocks / capacity:.1%}); allocated {observer_bytes / 2**20:.3f} MiB "
        f"({observer_bytes / max(1, report.shadow_blocks):.0f} B a shadow block) against the primary's "
        f"{primary_bytes / 2**20:.3f} MiB ({primary_bytes / capacity:.0f} B a block): {observer_bytes / max(1, primary_bytes):.1%}"
    )


def _cpu_seconds(chains: list[list[OffloadKey]], capacity: int, observer: WhatIfObserver | None) -> float:
    manager = CPUOffloadingManager(capacity, "lru")
    serve = RequestServer(manager).serve
    contexts = [ReqContext(str(number)) for number in range(len(chains))]
    started = time.thread_time()
    if observer is None:
        for keys, context in zip(chains, contexts):
            serve(keys, context)
    else:
        observe = observer.observe
        for keys, context in zip(chains, contexts):
            serve(keys, context)
            observe(keys)
    return time.thread_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--rate", type=float, default=0.01)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--salts", type=int, default=8, help="other hash salts to draw the sample with, for the bias and spread"
    )
    args = parser.parse_args()
    console = Console(width=150)
    configure(checks=False)
    shapes = traces(args.trace)
    for name, requests in shapes.items():
        accuracy(name, requests, args.rate, args.salts, console)
    cost(shapes["conversation (shared)"], args.rate, args.rounds, console)


if __name__ == "__main__":
    main()
