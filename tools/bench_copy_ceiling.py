"""The CPU copy engine's benchmark with its Python copy loop replaced by a C loop: the ceiling.

``tools/bench_transfer.py`` compares each job with one contiguous copy. Part of the gap
is not the engine's: a job of random pages is a copy per page, and the memory system
serves those slower than one long stream. This tool compiles a C loop (one ``memcpy``
per run, nothing else) with the system's C compiler, puts it in place of
``ThreadCopyEngine.copy_pages`` and runs the same benchmark, so the same jobs, runs and
clocks show what any per-run copy can reach on this machine. Needs ``cc``; it is a
measuring aid, the package itself compiles nothing.

    python tools/bench_copy_ceiling.py --pages 4K,16K,64K --batches 64,256,1024
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import bench_transfer
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
        dst, src, sizes = (
            np.asarray(column, dtype=np.int64) for column in (pages.dst, pages.src, pages.sizes)
        )
        # the offsets of ``pages`` count from the start of the engine's span
        base = ctypes.addressof(ctypes.c_char.from_buffer(self._span))
        copy_runs(sizes.size, dst.ctypes.data, src.ctypes.data, sizes.ctypes.data, base)

    ThreadCopyEngine.copy_pages = copy_pages  # type: ignore[method-assign]  # the point of the tool


def main(argv: Sequence[str]) -> int:
    """Compile the loop, swap it in, run ``bench_transfer`` on the CPU with ``argv``."""
    with tempfile.TemporaryDirectory() as directory:
        use_c_loop(compile_loop(Path(directory)))
        print("copy loop: C (one memcpy per run), in place of the engine's Python loop")
        return bench_transfer.main(["--device", "cpu", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
