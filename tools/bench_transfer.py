"""Store and load throughput of TorchOffloadingWorker against one contiguous copy of the same bytes.

For each page size (bytes of one block of one KV tensor) and batch (GPU blocks per job),
one job at a time is submitted and waited for, with random distinct GPU and host blocks
(``--mapping sequential`` uses consecutive ones). "GB/s" is the job's bytes over the
time the worker reports for it (``TransferResult.transfer_seconds``: CUDA events around
the job on its stream, or the copy thread's clock); "e2e" is over the caller's wall time
from submit until ``wait`` returns, validation and thread hand-offs included. The limit
is one contiguous copy of the same number of bytes between the same two memories,
block-aligned: on CUDA a pinned host <-> device torch ``copy_`` timed by CUDA events like the
job; on CPU by default the
faster of a torch ``copy_`` and one libc ``memmove`` (glibc's is often twice as fast as
torch's copy loop), or either alone with ``--limit``. The ratio is GB/s over the limit.
Each repetition runs the job and then the limit copy, each at fresh random places, and
each figure is the best over the repetitions.

    python tools/bench_transfer.py            # full table
    python tools/bench_transfer.py --quick    # a few sizes
"""

from __future__ import annotations

import argparse
import ctypes
import os
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from kvcontract.transfer import TorchOffloadingWorker

DESCRIPTION = "Store and load throughput of TorchOffloadingWorker against one contiguous copy."
KIB = 1024
MIB = 1024 * KIB
PAGES = (4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB, 2 * MIB)
BATCHES = (1, 4, 16, 64, 256, 1024)
QUICK_PAGES = (4 * KIB, 16 * KIB, 64 * KIB, 2 * MIB)
QUICK_BATCHES = (1, 64, 1024)
POOL_BYTES = 256 * MIB
"""Smallest KV pool per page size, so that random blocks spread beyond the caches."""
MIN_SECONDS = 0.2
"""Repeat a cell at least this long (and at least --reps times, at most MAX_REPS)."""
MAX_REPS = 50


def parse_size(text: str) -> int:
    """``4K``, ``2M``, ``64KiB`` or a plain number of bytes."""
    value = text.strip().upper().removesuffix("IB").removesuffix("B")
    units = {"K": KIB, "M": MIB, "G": 1024 * MIB}
    if value and value[-1] in units:
        return int(float(value[:-1]) * units[value[-1]])
    return int(value)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--pages", help="page sizes, e.g. 4K,64K,2M (default 4K..2M)")
    parser.add_argument("--batches", help="GPU blocks per job, e.g. 1,64,1024 (default 1..1024)")
    parser.add_argument("--quick", action="store_true", help="a few sizes, fewer repetitions")
    parser.add_argument("--layers", type=int, default=1, help="KV tensors (a page per block each)")
    parser.add_argument("--k", type=int, default=1, help="GPU blocks per offload block")
    parser.add_argument("--mapping", choices=("random", "sequential"), default="random")
    parser.add_argument("--reps", type=int, help="least repetitions per cell (default 5, quick 3)")
    parser.add_argument("--max-job", type=parse_size, help="skip jobs larger than this (default CPU 128M, CUDA 1G)")
    parser.add_argument(
        "--limit",
        choices=("best", "copy", "memmove"),
        default="best",
        help="CPU limit: the faster of one torch copy_ and one libc memmove (default), or one",
    )
    parser.add_argument(
        "--copy-path",
        choices=("auto", "zero-copy", "memcpy"),
        default="auto",
        help="CUDA: kernels that address pinned host memory, memcpy runs, or the worker's choice",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads for the limit copy (default 1)")
    parser.add_argument(
        "--no-huge-pages",
        action="store_true",
        help="do not ask torch for transparent huge pages for the KV tensors",
    )
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Figure:
    """Throughput (GB/s) of the worker (own timing and end to end) and of the limit copy."""

    worker: float
    end_to_end: float
    limit: float

    @property
    def ratio(self) -> float:
        """Worker over limit."""
        return self.worker / self.limit


@dataclass(frozen=True)
class Cell:
    """Store and load figures for one page size and batch."""

    page: int
    batch: int
    store: Figure
    load: Figure


class PagePool:
    """A worker over KV tensors of one page size, and the jobs and limit copies timed on it."""

    def __init__(self, args: argparse.Namespace, device: torch.device, page: int, batch: int) -> None:
        import torch

        from kvcontract.transfer import TorchOffloadingWorker

        self.args = args
        self.device = device
        self.page = page
        self.layers: int = args.layers
        self.k: int = args.k
        self.num_blocks = max(2 * batch * self.layers, POOL_BYTES // page // self.layers)
        self.kv = [torch.ones((self.num_blocks, page), dtype=torch.uint8, device=device) for _ in range(self.layers)]
        self.num_host = -(-self.num_blocks // self.k)
        zero_copy = {"auto": None, "zero-copy": True, "memcpy": False}[args.copy_path]
        self.worker: TorchOffloadingWorker = TorchOffloadingWorker(
            self.kv,
            num_host_blocks=self.num_host,
            blocks_per_offload_block=self.k,
            cuda_zero_copy=zero_copy,
        )
        self.worker.host_buffer.fill_(1)
        self.places = random.Random(page)
        self.job_id = 0

    def measure(self, direction: str, batch: int, reps: int) -> Figure:
        """Best worker and limit throughput for ``batch`` blocks, repeated job then limit."""
        nbytes = batch * self.page * self.layers
        times: list[tuple[float, float, float]] = []
        started = time.perf_counter()
        while len(times) < reps or (time.perf_counter() - started < MIN_SECONDS and len(times) < MAX_REPS):
            times.append((*self.job(direction, batch), self.limit(direction, nbytes)))
        return Figure(*(nbytes / min(column) / 1e9 for column in zip(*times)))

    def job(self, direction: str, batch: int) -> tuple[float, float]:
        """Run one job; its own seconds and the caller's wall seconds."""
        from kvcontract import BlockIdsSpec, GPULoadStoreSpec

        offload = -(-batch // self.k)
        if self.args.mapping == "random":
            gpu = self.places.sample(range(self.num_blocks), batch)
            host = self.places.sample(range(self.num_host), offload)
        else:
            gpu_at = self.places.randrange(self.num_blocks - batch + 1)
            host_at = self.places.randrange(self.num_host - offload + 1)
            gpu = list(range(gpu_at, gpu_at + batch))
            host = list(range(host_at, host_at + offload))
        self.job_id += 1
        self.sync()
        start = time.perf_counter()
        if direction == "store":
            self.worker.submit_store(self.job_id, GPULoadStoreSpec(gpu), BlockIdsSpec(host))
        else:
            self.worker.submit_load(self.job_id, BlockIdsSpec(host), GPULoadStoreSpec(gpu))
        self.worker.wait([self.job_id])
        seconds = time.perf_counter() - start
        (result,) = self.worker.get_finished()
        if not result.success:
            raise RuntimeError(f"{direction} job {self.job_id} failed")
        return result.transfer_seconds, seconds

    def limit(self, direction: str, nbytes: int) -> float:
        """Seconds of one contiguous copy of ``nbytes`` between the same two memories."""
        methods = ("copy", "memmove") if self.args.limit == "best" else (self.args.limit,)
        return min(self.contiguous_copy(direction, nbytes, method) for method in methods)

    def contiguous_copy(self, direction: str, nbytes: int, method: str) -> float:
        """Seconds of one copy of ``nbytes`` by ``method``, between random block-aligned places."""
        kv_flat = self.kv[0].view(-1)
        host_flat = self.worker.host_buffer.view(-1)
        kv_at = self.places.randrange((kv_flat.numel() - nbytes) // self.page + 1) * self.page
        host_at = self.places.randrange((host_flat.numel() - nbytes) // self.page + 1) * self.page
        kv_part = kv_flat[kv_at : kv_at + nbytes]
        host_part = host_flat[host_at : host_at + nbytes]
        dst, src = (host_part, kv_part) if direction == "store" else (kv_part, host_part)
        self.sync()
        if self.device.type == "cuda":
            return self.timed_on_device(dst, src)
        start = time.perf_counter()
        if method == "memmove":
            ctypes.memmove(dst.data_ptr(), src.data_ptr(), nbytes)
        else:
            dst.copy_(src)
        self.sync()
        return time.perf_counter() - start

    def timed_on_device(self, dst: torch.Tensor, src: torch.Tensor) -> float:
        """Seconds of ``dst.copy_(src)`` between CUDA events on the current stream."""
        import torch

        start = torch.Event(dst.device, enable_timing=True)
        end = torch.Event(dst.device, enable_timing=True)
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000

    def sync(self) -> None:
        """Wait for the device."""
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def main(argv: Sequence[str]) -> int:
    """Run the benchmark and print the table."""
    args = parse_args(argv)
    if not args.no_huge_pages:
        os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    import torch
    from rich.console import Console

    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    if device.type == "cuda":
        args.limit = "copy"
    torch.set_num_threads(args.threads)
    pages = [parse_size(p) for p in args.pages.split(",")] if args.pages else None
    batches = [int(b) for b in args.batches.split(",")] if args.batches else None
    pages = pages or list(QUICK_PAGES if args.quick else PAGES)
    batches = batches or list(QUICK_BATCHES if args.quick else BATCHES)
    reps: int = args.reps or (3 if args.quick else 5)
    max_job: int = args.max_job or (1024 * MIB if device.type == "cuda" else 128 * MIB)

    started = time.perf_counter()
    cells: list[Cell] = []
    copy_path, pinned = "", False
    for page in pages:
        fitting = [b for b in batches if b * page * args.layers <= max_job]
        if not fitting:
            continue
        pool = PagePool(args, device, page, max(fitting))
        copy_path, pinned = pool.worker.copy_path, pool.worker.host_pinned
        for batch in fitting:
            store = pool.measure("store", batch, reps)
            cells.append(Cell(page, batch, store, pool.measure("load", batch, reps)))
        pool.worker.shutdown()
        del pool

    console = Console(width=None if sys.stdout.isatty() else 132)
    limit = {"best": "best of copy_ and memmove", "copy": "copy_", "memmove": "memmove"}[args.limit]
    console.print(
        _table(
            cells,
            f"TorchOffloadingWorker on {device} (torch {torch.__version__}): {args.layers} KV "
            f"tensor(s), k={args.k}, {args.mapping} blocks, limit {limit}, best of >= {reps}",
        )
    )
    console.print(
        f"copy path: {copy_path}; host buffer pinned: {pinned}; torch CPU threads: "
        f"{args.threads}; jobs over {max_job / MIB:.0f} MiB skipped; "
        f"{time.perf_counter() - started:.1f} s"
    )
    for line in _targets(cells, device.type == "cuda"):
        console.print(line)
    return 0


def _table(cells: Sequence[Cell], title: str) -> object:
    from rich.table import Table

    table = Table(title=title)
    for column in ("page", "batch", "MiB/job"):
        table.add_column(column, justify="right")
    for direction in ("store", "load"):
        table.add_column(f"{direction} GB/s", justify="right")
        table.add_column("e2e", justify="right")
        table.add_column("limit", justify="right")
        table.add_column("ratio", justify="right")
    for cell in cells:
        nbytes = cell.batch * cell.page
        table.add_row(
            page_label(cell.page),
            str(cell.batch),
            f"{nbytes / MIB:.2f}",
            *(
                text
                for figure in (cell.store, cell.load)
                for text in (
                    f"{figure.worker:.2f}",
                    f"{figure.end_to_end:.2f}",
                    f"{figure.limit:.2f}",
                    _ratio(figure.ratio),
                )
            ),
        )
    return table


def page_label(nbytes: int) -> str:
    """A page size as the tables print it: ``64 KiB``, ``1 MiB``."""
    return f"{nbytes // MIB} MiB" if nbytes >= MIB else f"{nbytes // KIB} KiB"


def _ratio(value: float) -> str:
    colour = "green" if value >= 0.8 else "yellow" if value >= 0.5 else "red"
    return f"[{colour}]{value:.2f}[/{colour}]"


def _targets(cells: Sequence[Cell], on_cuda: bool) -> list[str]:
    """How many figures meet the issue's targets, which apply to batches of 64 blocks and more."""
    goals = (
        [("pages >= 64 KiB", 64 * KIB, None, 0.85), ("4 KiB pages", 4 * KIB, 4 * KIB, 0.5)]
        if on_cuda
        else [("pages >= 16 KiB", 16 * KIB, None, 0.8)]
    )
    lines: list[str] = []
    for label, smallest, largest, goal in goals:
        ratios = [
            figure.ratio
            for cell in cells
            if cell.batch >= 64 and smallest <= cell.page <= (largest or cell.page)
            for figure in (cell.store, cell.load)
        ]
        if ratios:
            met = sum(r >= goal for r in ratios)
            lines.append(
                f"target {goal} for {label}, batches >= 64: {met}/{len(ratios)} figures meet it "
                f"(lowest {min(ratios):.2f})"
            )
    return lines


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
