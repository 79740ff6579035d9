"""Read throughput of the file tier against ``dd``-style sequential reads of the same bytes.

``python tools/bench_file_tier.py`` stores ``--total`` bytes as blocks of each
``--block-sizes`` size in a :class:`~kvcontract.tiers.FileTier`, then times only the loads
of all of them (in jobs of ``--job-blocks`` blocks, with ``--threads`` I/O threads), and
compares with ``dd if=FILE of=/dev/null bs=1M`` of one file of the same size on the same
disk, with 1 MiB reads of that file straight into the host blocks (what a load must also
pay: writing the host memory), and with 1 MiB-buffer reads of the tier's own files.
Cold runs drop the page cache before every timed run (``/proc/sys/vm/drop_caches``, needs
root; if the kernel refuses, only warm runs are made and the table says so); warm runs
read data that was just written and read once.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from kvcontract import OffloadKey, TierJob, make_offload_key
from kvcontract.testing import example_identity
from kvcontract.tiers import FileTier

_UNITS = {"": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30}
_DD_SECONDS = re.compile(r"copied, ([0-9.e+-]+) s")
_READ_BUFFER = 1 << 20


def parse_size(text: str) -> int:
    """Bytes in ``text``: an integer with an optional ``KiB``, ``MiB`` or ``GiB`` suffix."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]iB)?\s*", text, re.IGNORECASE)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 131072, 128KiB or 2MiB")
    return int(match.group(1)) * _UNITS[(match.group(2) or "").upper()]


def drop_page_cache() -> bool:
    """Ask the kernel to drop clean page-cache pages; whether it was allowed."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class Run:
    """One timed way of reading the bytes: its best time over the repeats."""

    method: str
    cache: str
    block_bytes: int
    total_bytes: int
    seconds: float

    @property
    def gbps(self) -> float:
        """Throughput in GB/s (10^9 bytes per second)."""
        return self.total_bytes / self.seconds / 1e9


def best_of(repeat: int, cold: bool, timed: Callable[[], float]) -> float:
    """The smallest of ``repeat`` timings, dropping the page cache before each when ``cold``."""
    times: list[float] = []
    for _ in range(repeat):
        if cold:
            drop_page_cache()
        times.append(timed())
    return min(times)


def tier_keys(count: int) -> list[OffloadKey]:
    """``count`` distinct offload keys."""
    return [make_offload_key(i.to_bytes(32, "big")) for i in range(count)]


def wait_for(tier: FileTier, job_ids: set[int]) -> bool:
    """Poll ``tier`` (0.2 ms apart) until every job has finished; whether all succeeded."""
    ok = True
    while job_ids:
        finished = tier.get_finished()
        if not finished:
            time.sleep(0.0002)
        for result in finished:
            job_ids.discard(result.job_id)
            ok = ok and result.success
    return ok


def batches(count: int, size: int) -> Iterator[range]:
    """``range(count)`` cut into consecutive ranges of at most ``size``."""
    for start in range(0, count, size):
        yield range(start, min(start + size, count))


def time_tier_loads(tier: FileTier, keys: list[OffloadKey], job_blocks: int) -> float:
    """Seconds to load every key into host blocks of the same index, in jobs of ``job_blocks``."""
    ids = itertools.count()
    pending: set[int] = set()
    start = time.perf_counter()
    for ids_range in batches(len(keys), job_blocks):
        job_id = next(ids)
        pending.add(job_id)
        if not tier.submit_load(TierJob(job_id, keys[ids_range.start : ids_range.stop], ids_range)):
            raise RuntimeError(f"the tier refused load job {job_id}")
    ok = wait_for(tier, pending)
    seconds = time.perf_counter() - start
    if not ok:
        raise RuntimeError("a load job failed")
    return seconds


def time_sequential_files(paths: list[Path]) -> float:
    """Seconds to read ``paths`` one after another, each sequentially with a 1 MiB buffer."""
    buffer = bytearray(_READ_BUFFER)
    view = memoryview(buffer)
    start = time.perf_counter()
    for path in paths:
        with open(path, "rb", buffering=0) as file:
            while file.readinto(view):
                pass
    return time.perf_counter() - start


def time_file_into_host(path: Path, host: torch.Tensor) -> float:
    """Seconds to read ``path`` sequentially, 1 MiB per call, straight into ``host``'s memory."""
    target = host.view(-1).numpy().data
    fd = os.open(path, os.O_RDONLY)
    try:
        start = time.perf_counter()
        offset = 0
        while offset < len(target):
            offset += os.preadv(fd, [target[offset : offset + _READ_BUFFER]], offset)
        return time.perf_counter() - start
    finally:
        os.close(fd)


def time_dd(path: Path) -> float:
    """Seconds ``dd if=PATH of=/dev/null bs=1M`` reports for reading ``path``."""
    completed = subprocess.run(
        ["dd", f"if={path}", "of=/dev/null", "bs=1M"], capture_output=True, text=True, check=True
    )
    match = _DD_SECONDS.search(completed.stderr)
    if match is None:
        raise RuntimeError(f"cannot read dd's time from: {completed.stderr!r}")
    return float(match.group(1))


def bench_block_size(
    workdir: Path,
    block_bytes: int,
    total: int,
    threads: list[int],
    job_blocks: int,
    repeat: int,
    caches: list[str],
    sealed: bool = False,
) -> list[Run]:
    """Every measurement for blocks of ``block_bytes``: dd, sequential files, the tier per thread count
    (and, ``sealed``, the tier again with its blocks sealed with an integrity key's MAC)."""
    count = max(1, total // block_bytes)
    total_bytes = count * block_bytes
    host = torch.randint(0, 256, (count, block_bytes), dtype=torch.uint8)
    original = host.clone()
    keys = tier_keys(count)
    root = workdir / f"tier-{block_bytes}"
    identity = example_identity(block_bytes)
    store_tier = FileTier(root, count, host, identity=identity, io_threads=max(threads))
    store_ids = set(range(len(list(batches(count, job_blocks)))))
    for job_id, ids_range in enumerate(batches(count, job_blocks)):
        store_tier.submit_store(TierJob(job_id, keys[ids_range.start : ids_range.stop], ids_range))
    if not wait_for(store_tier, store_ids):
        raise RuntimeError("storing the blocks failed")
    store_tier.shutdown()
    big = workdir / f"sequential-{block_bytes}.bin"
    with open(big, "wb") as file:
        file.write(host.numpy().tobytes())
    paths = sorted(root.rglob("*.kvb"))
    runs: list[Run] = []
    for cache in caches:
        cold = cache == "cold"
        if not cold:
            time_dd(big)
            time_sequential_files(paths)
        seconds = best_of(repeat, cold, lambda: time_dd(big))
        runs.append(Run("dd bs=1M, one file", cache, block_bytes, total_bytes, seconds))
        seconds = best_of(repeat, cold, lambda: time_file_into_host(big, host))
        method = "1 MiB reads of one file into host blocks"
        runs.append(Run(method, cache, block_bytes, total_bytes, seconds))
        seconds = best_of(repeat, cold, lambda: time_sequential_files(paths))
        runs.append(Run("1 MiB reads of the tier's files", cache, block_bytes, total_bytes, seconds))
        for thread_count in threads:
            tier = FileTier(root, count, host, identity=identity, io_threads=thread_count)
            host.zero_()
            seconds = best_of(repeat, cold, functools.partial(time_tier_loads, tier, keys, job_blocks))
            tier.shutdown()
            if not torch.equal(host, original):
                raise RuntimeError("the loaded blocks differ from the stored ones")
            method = f"FileTier loads, {thread_count} thread{'s' if thread_count > 1 else ''}"
            runs.append(Run(method, cache, block_bytes, total_bytes, seconds))
    if sealed:
        runs += _sealed_runs(
            workdir / f"sealed-{block_bytes}", host, original, keys, threads, job_blocks, repeat, caches
        )
    shutil.rmtree(root)
    big.unlink()
    return runs


def _sealed_runs(
    root: Path,
    host: torch.Tensor,
    original: torch.Tensor,
    keys: list[OffloadKey],
    threads: list[int],
    job_blocks: int,
    repeat: int,
    caches: list[str],
) -> list[Run]:
    """The tier's loads per thread count with its blocks sealed with an integrity key (a MAC in place of the checksum)."""
    count, block_bytes = int(host.shape[0]), int(host.shape[1])
    identity = example_identity(block_bytes)
    key = os.urandom(32)
    host.copy_(original)
    store_tier = FileTier(root, count, host, identity=identity, io_threads=max(threads), integrity_key=key)
    store_ids = set(range(len(list(batches(count, job_blocks)))))
    for job_id, ids_range in enumerate(batches(count, job_blocks)):
        store_tier.submit_store(TierJob(job_id, keys[ids_range.start : ids_range.stop], ids_range))
    if not wait_for(store_tier, store_ids):
        raise RuntimeError("storing the sealed blocks failed")
    store_tier.shutdown()
    runs: list[Run] = []
    for cache, thread_count in itertools.product(caches, threads):
        tier = FileTier(root, count, host, identity=identity, io_threads=thread_count, integrity_key=key)
        host.zero_()
        seconds = best_of(repeat, cache == "cold", functools.partial(time_tier_loads, tier, keys, job_blocks))
        tier.shutdown()
        if not torch.equal(host, original):
            raise RuntimeError("the loaded sealed blocks differ from the stored ones")
        method = f"FileTier loads sealed (MAC), {thread_count} thread{'s' if thread_count > 1 else ''}"
        runs.append(Run(method, cache, block_bytes, count * block_bytes, seconds))
    shutil.rmtree(root)
    return runs


def main() -> None:
    """Run the benchmark for each block size and print one table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--block-sizes", default="128KiB,512KiB,2MiB,8MiB", help="comma-separated sizes")
    parser.add_argument("--total", type=parse_size, default="256MiB", help="bytes per block size")
    parser.add_argument("--threads", default="1,4,8", help="comma-separated I/O thread counts of the tier")
    parser.add_argument("--job-blocks", type=int, default=16, help="blocks per load job")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per measurement (best kept)")
    parser.add_argument("--dir", type=Path, help="where to write (default: a temporary directory)")
    parser.add_argument("--cache", choices=["cold", "warm", "both"], default="both")
    parser.add_argument("--integrity-key", action="store_true", help="also time loads of blocks sealed with a MAC")
    args = parser.parse_args()
    block_sizes = [parse_size(size) for size in args.block_sizes.split(",")]
    threads = [int(count) for count in args.threads.split(",")]
    can_drop = drop_page_cache()
    caches = ["cold", "warm"] if args.cache == "both" else [args.cache]
    if not can_drop:
        caches = ["warm"]
    workdir = Path(tempfile.mkdtemp(prefix="bench-file-tier-", dir=args.dir))
    try:
        runs = [
            run
            for block_bytes in block_sizes
            for run in bench_block_size(
                workdir, block_bytes, args.total, threads, args.job_blocks, args.repeat, caches, args.integrity_key
            )
        ]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    note = "" if can_drop else "; the page cache could not be dropped, so all runs are warm"
    table = Table(title=f"File tier read throughput, best of {args.repeat}, in {workdir.parent}{note}")
    for column in ("block", "cache", "method", "MiB read", "seconds", "GB/s", "vs dd"):
        left = column in ("method", "cache")
        table.add_column(column, justify="left" if left else "right", no_wrap=True)
    for block_bytes, cache in itertools.product(block_sizes, caches):
        rows = [run for run in runs if run.block_bytes == block_bytes and run.cache == cache]
        dd = rows[0]
        for run in rows:
            table.add_row(
                f"{block_bytes >> 10} KiB",
                cache,
                run.method,
                f"{run.total_bytes / (1 << 20):.0f}",
                f"{run.seconds:.4f}",
                f"{run.gbps:.2f}",
                f"{run.gbps / dd.gbps:.2f}",
            )
        table.add_section()
    Console(width=150).print(table)


if __name__ == "__main__":
    main()
