"""The CPU copy engine's benchmark with its copy loop replaced by a bare C loop: the ceiling.

``tools/bench_transfer.py`` compares each job with one contiguous copy. Part of the gap
is not the engine's: a job of random pages is a copy per page, and the memory system
serves those slower than one long stream. This tool compiles a C loop (one ``memcpy``
per run, nothing else: no checks, the GIL held) with the system's C compiler, puts it in
place of ``ThreadCopyEngine.copy_pages`` and runs the same benchmark, so the same jobs,
runs and clocks show what any per-run copy can reach on this machine. Needs ``cc``. The
engine copies with the package's own compiled loop (``kvcontract.transfer.run_copy``)
when it was built, else with its Python loop; ``--python-loop`` forces the latter.

    python tools/bench_copy_ceiling.py --pages 4K,16K,64K --batches 64,256,1024

``--cpu-rounds N`` instead times ``ThreadCopyEngine.run`` on the calling thread with both
loops and one ``memmove`` of the same bytes in CPU time (``time.thread_time``, so a loaded
machine's preemption does not count), N rounds of the best of five in rotating order, and
prints medians of the per-round ratios.

    python tools/bench_copy_ceiling.py --cpu-rounds 7 --pages 4K,16K,64K --batches 64,1024
"""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import bench_transfer
import numpy as np

from kvcontract import GPULoadStoreSpec
from kvcontract.transfer import TorchOffloadingWorker
from kvcontract.transfer.copy_engine import Direction
from kvcontract.transfer.mapping import BlockMapping
from kvcontract.transfer.run_copy import compiled_copy_runs
from kvcontract.transfer.thread_engine import Pages, ThreadCopyEngine

C_LOOP = """
#include <stdint.h>
#include <string.h>
void copy_runs(int64_t n, const int64_t *dst, const int64_t *src, const int64_t *size, char *base) {
    for (int64_t i = 0; i < n; i++) memcpy(base + dst[i], base + src[i], (size_t)size[i]);
}
"""


def compile_loop(directory: Path) -> ctypes.CDLL:
    """Build ``C_LOOP`` into a shared library in ``directory`` and load it."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit("bench_copy_ceiling: no C compiler (cc or gcc) on PATH; install one")
    source, library = directory / "copy_runs.c", directory / "copy_runs.so"
    source.write_text(C_LOOP)
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return ctypes.CDLL(str(library))


def use_c_loop(library: ctypes.CDLL) -> None:
    """Make every ``ThreadCopyEngine`` copy its runs with the C loop (one call per job and group)."""
    copy_runs = library.copy_runs
    copy_runs.restype = None
    copy_runs.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 4

    def copy_pages(self: ThreadCopyEngine, pages: Pages) -> None:
        dst, src, sizes = (np.asarray(column, dtype=np.int64) for column in (pages.dst, pages.src, pages.sizes))
        # the offsets of ``pages`` count from the start of the engine's span
        base = ctypes.addressof(ctypes.c_char.from_buffer(self._span))  # pyright: ignore[reportPrivateUsage]  # the engine's own memory
        copy_runs(sizes.size, dst.ctypes.data, src.ctypes.data, sizes.ctypes.data, base)

    ThreadCopyEngine.copy_pages = copy_pages  # type: ignore[method-assign]  # the point of the tool


CopyLoop = Callable[[ThreadCopyEngine, Pages], None]
REPS = 5


def cpu_rounds(rounds: int, pages: Sequence[int], batches: Sequence[int], c_loop: CopyLoop, compiled: bool) -> None:
    """Print, per cell, engine / memmove, C loop / memmove and engine / C loop in CPU time.

    Jobs over 128 MiB are skipped, as in ``bench_transfer``: their ``memmove`` takes glibc's
    non-temporal path, which no block-sized copy does.
    """
    import torch

    torch.set_num_threads(1)
    engine_loop: CopyLoop = ThreadCopyEngine.copy_pages
    places = random.Random(0)
    workers: dict[int, tuple[int, torch.Tensor, TorchOffloadingWorker]] = {}
    for page in pages:
        blocks = max(2 * max(batches), bench_transfer.POOL_BYTES // page)
        kv = torch.ones((blocks, page), dtype=torch.uint8)
        worker = TorchOffloadingWorker([kv], num_host_blocks=blocks, cpu_compiled_loop=compiled)
        worker.host_buffer.fill_(1)
        workers[page] = (blocks, kv, worker)

    def job(page: int, batch: int, direction: Direction, loop: CopyLoop | None) -> float:
        blocks, kv, worker = workers[page]
        if loop is None:
            nbytes = batch * page
            kv_at = kv.data_ptr() + places.randrange(blocks - batch + 1) * page
            host_at = worker.host_buffer.data_ptr() + places.randrange(blocks - batch + 1) * page
            dst, src = (host_at, kv_at) if direction is Direction.STORE else (kv_at, host_at)
            start = time.thread_time()
            ctypes.memmove(dst, src, nbytes)
            return time.thread_time() - start
        engine = worker._engine  # pyright: ignore[reportPrivateUsage]  # the engine itself, run on this thread
        assert isinstance(engine, ThreadCopyEngine)
        gpu = GPULoadStoreSpec(places.sample(range(blocks), batch))
        host = places.sample(range(blocks), batch)
        mapping = BlockMapping.of(
            engine._layout,  # pyright: ignore[reportPrivateUsage]  # the engine's own layout
            gpu,
            host,
            num_host_blocks=blocks,
            to_gpu=direction is Direction.LOAD,
        )
        setattr(ThreadCopyEngine, "copy_pages", loop)  # the point of the tool
        try:
            start = time.thread_time()
            engine.run(direction, mapping)
            return time.thread_time() - start
        finally:
            setattr(ThreadCopyEngine, "copy_pages", engine_loop)

    loops: list[CopyLoop | None] = [engine_loop, c_loop, None]
    cells: dict[tuple[int, int, Direction], list[list[float]]] = {}
    for round_ in range(rounds):
        for page in pages:
            for batch in (b for b in batches if b * page <= 128 * bench_transfer.MIB):
                for direction in Direction:
                    best = [float("inf")] * 3
                    for rep in range(REPS):
                        for i in ((round_ + rep + j) % 3 for j in range(3)):
                            best[i] = min(best[i], job(page, batch, direction, loops[i]))
                    cells.setdefault((page, batch, direction), []).append(best)
        print(f"round {round_ + 1}/{rounds}, load {os.getloadavg()[0]:.1f}", flush=True)
    for _, _, worker in workers.values():
        worker.shutdown()
    print("page batch direction: engine/memmove, C loop/memmove, engine/C loop (median, min-max)")
    for (page, batch, direction), times in cells.items():
        columns = (
            [t[2] / t[0] for t in times],
            [t[2] / t[1] for t in times],
            [t[1] / t[0] for t in times],
        )
        text = ", ".join(f"{statistics.median(c):.2f} ({min(c):.2f}-{max(c):.2f})" for c in columns)
        print(f"{bench_transfer.page_label(page)} {batch} {direction.value}: {text}")


def main(argv: Sequence[str]) -> int:
    """Compile the loop, swap it in, run ``bench_transfer`` on the CPU with ``argv``."""
    rounds = 0
    compiled = "--python-loop" not in argv
    argv = [a for a in argv if a != "--python-loop"]
    print(f"engine loop: {'compiled' if compiled and compiled_copy_runs else 'Python'}")
    if "--cpu-rounds" in argv:
        at = list(argv).index("--cpu-rounds")
        rounds = int(argv[at + 1])
        argv = [*argv[:at], *argv[at + 2 :]]
    with tempfile.TemporaryDirectory() as directory:
        engine_loop = ThreadCopyEngine.copy_pages
        use_c_loop(compile_loop(Path(directory)))
        if rounds:
            c_loop = ThreadCopyEngine.copy_pages
            setattr(ThreadCopyEngine, "copy_pages", engine_loop)
            args = bench_transfer.parse_args(["--device", "cpu", *argv])
            pages = [bench_transfer.parse_size(p) for p in (args.pages or "4K,16K,64K").split(",")]
            batches = [int(b) for b in (args.batches or "64,256,1024").split(",")]
            cpu_rounds(rounds, pages, batches, c_loop, compiled and compiled_copy_runs is not None)
            return 0
        print("copy loop: bare C (one memcpy per run), in place of the engine's loop")
        return bench_transfer.main(["--device", "cpu", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
