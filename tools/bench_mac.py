"""What a keyed MAC costs per byte against the tiers' checksum: BLAKE3 keyed, HMAC-SHA256, keyed BLAKE2b, xxh3.

``python tools/bench_mac.py`` hashes one buffer of each block size over and over on this
thread (cache-hot, as a tier hashes a block it has just read) and prints GB/s per method:
the figures behind the integrity key's choice of BLAKE3 (``kvcontract.tiers.integrity``).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import os
import time
from collections.abc import Callable, Sequence

import xxhash
from blake3 import blake3
from rich.console import Console
from rich.table import Table

BLOCK_SIZES = (64 << 10, 512 << 10, 2 << 20)


def _rate(run: Callable[[], object], nbytes: int, min_bytes: int) -> float:
    """GB/s of ``run`` over ``nbytes`` a call, best of three timings of at least ``min_bytes`` each."""
    calls = max(10, min_bytes // nbytes)
    run()
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(calls):
            run()
        best = min(best, time.perf_counter() - started)
    return nbytes * calls / best / 1e9


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--min-bytes", type=int, default=256 << 20, help="bytes hashed per timing")
    options = parser.parse_args(argv)
    key = os.urandom(32)
    table = Table(title="GB/s on one thread, cache-hot (best of 3)")
    methods = ("xxh3-64 (checksum)", "BLAKE3 keyed", "HMAC-SHA256", "BLAKE2b keyed")
    for column in ("block", *methods):
        table.add_column(column, justify="right")
    for size in BLOCK_SIZES:
        data = memoryview(os.urandom(size))
        runs: list[Callable[[], object]] = [
            lambda: xxhash.xxh3_64_intdigest(data),  # timed before the loop moves on
            lambda: blake3(data, key=key).digest(16),
            lambda: hmac.digest(key, data, "sha256"),
            lambda: hashlib.blake2b(data, key=key, digest_size=16).digest(),
        ]
        table.add_row(f"{size >> 10} KiB", *(f"{_rate(run, size, options.min_bytes):.2f}" for run in runs))
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
