"""CPU copies while another Python thread is busy: job throughput and that thread's pauses.

An engine's scheduler is a Python thread that rarely sleeps. The CPU copy engine shares
the GIL with it, so what matters is how both fare together: ``python
tools/bench_copy_contention.py`` runs store jobs of ``--batch`` random blocks of each
``--pages`` size back to back for ``--seconds``, while a second thread spins in Python
and records the gaps between its iterations, and prints jobs finished, GB/s, the
spinning thread's iterations ("spins": its share of the interpreter) and its longest and
99.9th-percentile gap.

    python tools/bench_copy_contention.py [--pages 16K,256K,2M] [--seconds 2] [--python-loop]

The engine copies with its compiled loop (the GIL released for a job's copies) when the
package has it; ``--python-loop`` measures the Python loop, which holds the GIL.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from bench_transfer import MIB, POOL_BYTES, parse_size
from rich.console import Console
from rich.table import Table

from kvcontract import BlockIdsSpec, GPULoadStoreSpec
from kvcontract.transfer import TorchOffloadingWorker
from kvcontract.transfer.run_copy import compiled_copy_runs

JOB_BYTES = 16 * MIB
"""Bytes per store job unless ``--batch`` says otherwise."""


def page_sizes(text: str) -> list[int]:
    """Comma-separated page sizes such as ``16K,2M``; argparse reports a bad one in one line."""
    return [parse_size(part) for part in text.split(",")]


@dataclass(frozen=True)
class Contention:
    """One page size: jobs finished, their throughput, and the busy thread's gaps."""

    page: int
    batch: int
    jobs: int
    gbps: float
    spins: int
    longest_gap_ms: float
    p999_gap_ms: float


def measure(page: int, batch: int, seconds: float, compiled_loop: bool | None) -> Contention:
    """Store jobs back to back for ``seconds`` while a second thread spins in Python.

    The KV cache and the host buffer hold ``POOL_BYTES`` each, as in ``bench_transfer.py``.
    """
    num_blocks = POOL_BYTES // page
    worker = TorchOffloadingWorker(
        [torch.ones((num_blocks, page), dtype=torch.uint8)],
        num_host_blocks=num_blocks,
        cpu_compiled_loop=compiled_loop,
    )
    places = random.Random(page)
    gaps: list[float] = []
    stop = threading.Event()

    def spin() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    spinner = threading.Thread(target=spin)
    spinner.start()
    jobs = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        jobs += 1
        gpu = places.sample(range(num_blocks), batch)
        host = places.sample(range(num_blocks), batch)
        worker.submit_store(jobs, GPULoadStoreSpec(gpu), BlockIdsSpec(host))
        worker.wait([jobs])
        worker.get_finished()
    elapsed = time.perf_counter() - start
    stop.set()
    spinner.join()
    worker.shutdown()
    gaps.sort()
    return Contention(
        page,
        batch,
        jobs,
        jobs * batch * page / elapsed / 1e9,
        len(gaps),
        gaps[-1] * 1e3,
        gaps[int(len(gaps) * 0.999)] * 1e3,
    )


def main(argv: Sequence[str]) -> int:
    """Measure each page size and print one table."""
    parser = argparse.ArgumentParser(description="CPU store jobs beside a busy Python thread.")
    parser.add_argument("--pages", type=page_sizes, default="16K,256K,2M", help="page sizes, e.g. 16K,2M")
    parser.add_argument("--batch", type=int, help=f"blocks per job (default: {JOB_BYTES // MIB} MiB a job)")
    parser.add_argument("--seconds", type=float, default=2.0, help="how long each page size runs")
    parser.add_argument("--python-loop", action="store_true", help="copy with the Python loop, not the compiled one")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    loop = "Python" if args.python_loop or compiled_copy_runs is None else "compiled"
    table = Table(title=f"Store jobs with a busy Python thread beside them ({loop} loop)")
    for column in ("page", "batch", "jobs", "GB/s", "spins", "longest gap ms", "p99.9 gap ms"):
        table.add_column(column, justify="right")
    for page in args.pages:
        batch = args.batch or max(1, JOB_BYTES // page)
        found = measure(page, batch, args.seconds, False if args.python_loop else None)
        table.add_row(
            f"{page >> 10} KiB",
            str(found.batch),
            str(found.jobs),
            f"{found.gbps:.2f}",
            f"{found.spins:,}",
            f"{found.longest_gap_ms:.2f}",
            f"{found.p999_gap_ms:.3f}",
        )
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
