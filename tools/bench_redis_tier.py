"""The Redis tier's throughput against raw redis-py, and its cross-engine hit ratio on the shipped trace.

``python tools/bench_redis_tier.py throughput`` starts a fresh ``redis-server`` on a free
loopback port and, for 64 KiB, 512 KiB and 2 MiB blocks in jobs of 16 and 64 blocks,
times (wall clock: the bytes cross a socket to another process) the tier's store and load
jobs against raw redis-py pipelined SET and GET of the same bytes from the same process,
in pipelines of at most 8 MiB as the tier sends them (a single 128 MiB pipeline is
several times slower, which would flatter the tier). Tier and raw alternate round by round; the table gives the median
of the per-round ratios. Each timed run moves at least ``--min-bytes``.

``python tools/bench_redis_tier.py hits`` deals the trace's requests round-robin to two
simulated engines (``kvcontract.sim.multi_engine``), each with host memory for 2 % of the
unique blocks, sharing one Redis whose ``maxmemory`` holds 50 % of them (``allkeys-lru``;
the bytes per block are measured on the server first), and prints the hit ratio over all
requests. Every loaded block is verified byte for byte.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import redis
import torch
from rich.console import Console
from rich.table import Table

from kvcontract import OffloadKey, SecondaryTier, TierJob, make_offload_key
from kvcontract.config import load_config
from kvcontract.sim.multi_engine import print_engines_report, run_engines
from kvcontract.sim.shipped import shipped_trace
from kvcontract.sim.trace import read_trace
from kvcontract.testing import example_identity
from kvcontract.tiers import RedisTier
from kvcontract.tiers.redis.client import RedisClient
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.tiers.redis.support import HOST, RedisServer

BLOCK_SIZES = (64 << 10, 512 << 10, 2 << 20)
JOB_BLOCKS = (16, 64)
TRACE = shipped_trace("mooncake-conversation")
_POLL_SECONDS = 0.0001
_CALIBRATION_BLOCKS = 2000
PIPELINE_BYTES = 8 << 20
"""Raw pipelines carry at most this many value bytes, as the tier's do: one 128 MiB pipeline is far slower."""


def _wait(tier: SecondaryTier, job_ids: Sequence[int]) -> None:
    pending = set(job_ids)
    while pending:
        for result in tier.get_finished():
            if not result.success:
                raise RuntimeError(f"job {result.job_id} failed")
            pending.discard(result.job_id)
        if pending:
            time.sleep(_POLL_SECONDS)


def _timed(run: Callable[[], None]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def throughput(rounds: int, min_bytes: int, io_threads: int, console: Console, *, sealed: bool = False) -> None:
    """Median tier/raw ratios of store and load throughput for every block size and job size (values MAC-sealed if ``sealed``)."""
    values = "values sealed with an integrity key (BLAKE3 MAC)" if sealed else "values with the xxh3 checksum"
    table = Table(title=f"Redis tier against raw redis-py pipelines ({rounds} interleaved rounds, median), {values}")
    for column in ("block", "job", "store GB/s tier", "raw", "ratio", "load GB/s tier", "raw", "ratio"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer(Path(workdir), "--maxmemory-policy", "allkeys-lru")
        try:
            raw: RedisClient = redis.Redis(host=HOST, port=server.port)
            for block_bytes, job_blocks in itertools.product(BLOCK_SIZES, JOB_BLOCKS):
                row = _measure(server, raw, block_bytes, job_blocks, rounds, min_bytes, io_threads, sealed)
                table.add_row(f"{block_bytes >> 10} KiB", str(job_blocks), *row)
                console.print(f"measured {block_bytes >> 10} KiB blocks in jobs of {job_blocks}")
            raw.close()
        finally:
            server.stop()
    console.print(table)


def _measure(
    server: RedisServer,
    raw: RedisClient,
    block_bytes: int,
    job_blocks: int,
    rounds: int,
    min_bytes: int,
    io_threads: int,
    sealed: bool,
) -> list[str]:
    jobs = max(1, min_bytes // (block_bytes * job_blocks))
    host = torch.randint(0, 256, (job_blocks, block_bytes), dtype=torch.uint8)
    payloads = [host[i].numpy().tobytes() for i in range(job_blocks)]
    tier = RedisTier(
        host,
        identity=example_identity(block_bytes),
        url=server.url,
        pool_size=io_threads + 2,
        socket_timeout=30.0,
        integrity_key=os.urandom(32) if sealed else None,
        options=RemoteTierOptions(io_threads=io_threads),
    )
    job_ids = itertools.count(1)
    ratios: dict[str, list[float]] = {"store": [], "load": []}
    rates: dict[str, list[float]] = {"store tier": [], "store raw": [], "load tier": [], "load raw": []}
    total = jobs * job_blocks * block_bytes
    per_pipeline = max(1, PIPELINE_BYTES // block_bytes)
    try:
        for round_ in range(rounds):
            server.command("FLUSHALL")
            keys = [[_key(round_, j, i) for i in range(job_blocks)] for j in range(jobs)]
            raw_names = [[b"raw:" + k for k in job] for job in keys]

            def tier_store() -> None:
                submitted = [next(job_ids) for _ in keys]
                for job_id, job in zip(submitted, keys):
                    assert tier.submit_store(TierJob(job_id, job, range(job_blocks)))
                _wait(tier, submitted)

            def tier_load() -> None:
                submitted = [next(job_ids) for _ in keys]
                for job_id, job in zip(submitted, keys):
                    assert tier.submit_load(TierJob(job_id, job, range(job_blocks)))
                _wait(tier, submitted)

            def raw_store() -> None:
                for names in raw_names:
                    for start in range(0, job_blocks, per_pipeline):
                        pipe = raw.pipeline(transaction=False)
                        for name, payload in zip(names[start : start + per_pipeline], payloads[start:]):
                            pipe.set(name, payload)
                        pipe.execute()

            def raw_load() -> None:
                for names in raw_names:
                    for start in range(0, job_blocks, per_pipeline):
                        pipe = raw.pipeline(transaction=False)
                        for name in names[start : start + per_pipeline]:
                            pipe.get(name)
                        pipe.execute()

            first, second = ((tier_store, raw_store), (raw_store, tier_store))[round_ % 2]
            seconds = {fn: _timed(fn) for fn in (first, second)}
            first, second = ((tier_load, raw_load), (raw_load, tier_load))[round_ % 2]
            seconds.update({fn: _timed(fn) for fn in (first, second)})
            for what, tier_fn, raw_fn in (("store", tier_store, raw_store), ("load", tier_load, raw_load)):
                ratios[what].append(seconds[raw_fn] / seconds[tier_fn])
                rates[f"{what} tier"].append(total / seconds[tier_fn] / 1e9)
                rates[f"{what} raw"].append(total / seconds[raw_fn] / 1e9)
    finally:
        tier.shutdown()
    median = statistics.median
    return [
        f"{median(rates['store tier']):.2f}",
        f"{median(rates['store raw']):.2f}",
        f"{median(ratios['store']):.2f}",
        f"{median(rates['load tier']):.2f}",
        f"{median(rates['load raw']):.2f}",
        f"{median(ratios['load']):.2f}",
    ]


def _key(round_: int, job: int, block: int) -> OffloadKey:
    return make_offload_key(f"{round_}:{job}:{block}".encode().ljust(16, b"."))


def hits(trace: Path, engines: int, requests: int | None, console: Console) -> None:
    """The hit ratio of ``engines`` engines sharing one Redis on the trace."""
    served = [list(request.hash_ids) for request in read_trace(trace)][:requests]
    unique = len({block for request in served for block in request})
    host_blocks = max(1, unique * 2 // 100)
    redis_blocks = unique // 2
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer(Path(workdir), "--maxmemory-policy", "allkeys-lru")
        try:
            config = load_config(
                base={
                    "kv_layout": {"preset": "tiny", "block_tokens": 16, "offload_block_tokens": 16},
                    "manager": {
                        "kind": "tiering",
                        "primary": {"kind": "cpu", "capacity": host_blocks, "policy": {"kind": "lru"}},
                        "secondary": [{"kind": "redis", "url": server.url, "namespace": "bench"}],
                    },
                }
            )
            per_block = _bytes_per_block(server, config.kv_layout.offload_block_bytes)
            baseline = _used_memory(server)
            maxmemory = baseline + per_block * redis_blocks
            server.command("CONFIG", "SET", "maxmemory", maxmemory)
            console.print(
                f"{len(served):,} requests, {unique:,} unique blocks; host memory {host_blocks:,} blocks per "
                f"engine; Redis maxmemory {maxmemory / 2**20:.1f} MiB = {redis_blocks:,} blocks of "
                f"{per_block:,} bytes (measured) over a baseline of {baseline / 2**20:.1f} MiB"
            )
            report = run_engines(config, served, engines)
            evicted = int(server.command("INFO", "stats")["evicted_keys"])
            console.print(f"server: {evicted:,} keys evicted, {int(server.command('DBSIZE')):,} keys at the end")
        finally:
            server.stop()
    print_engines_report(report, console=console)
    console.print(f"hit ratio over all requests: {report.hit_ratio:.4f} in {report.seconds:.0f} s")


def _bytes_per_block(server: RedisServer, block_bytes: int) -> int:
    """Server memory per stored block of ``block_bytes``: the growth of ``used_memory`` over many blocks."""
    host = torch.zeros((1, block_bytes), dtype=torch.uint8)
    tier = RedisTier(
        host, identity=example_identity(block_bytes), url=server.url, options=RemoteTierOptions(namespace="calibration")
    )
    try:
        before = _used_memory(server)
        keys = [make_offload_key(i.to_bytes(8, "big")) for i in range(_CALIBRATION_BLOCKS)]
        for job, start in enumerate(range(0, len(keys), 100)):
            chunk = keys[start : start + 100]
            assert tier.submit_store(TierJob(job, chunk, [0] * len(chunk)))
            _wait(tier, [job])
        after = _used_memory(server)
    finally:
        tier.shutdown()
        server.command("FLUSHALL")
    return max(block_bytes, (after - before) // _CALIBRATION_BLOCKS)


def _used_memory(server: RedisServer) -> int:
    return int(server.command("INFO", "memory")["used_memory"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="part", required=True)
    speed = commands.add_parser("throughput", help="tier against raw redis-py, per block and job size")
    speed.add_argument("--rounds", type=int, default=5)
    speed.add_argument("--min-bytes", type=int, default=64 << 20, help="bytes moved per timed run")
    speed.add_argument("--io-threads", type=int, default=4)
    speed.add_argument("--integrity-key", action="store_true", help="seal values with a MAC instead of the checksum")
    shared = commands.add_parser("hits", help="cross-engine hit ratio on the trace")
    shared.add_argument("--trace", type=Path, default=TRACE)
    shared.add_argument("--engines", type=int, default=2)
    shared.add_argument("--requests", type=int, help="the first N requests (default: all)")
    options = parser.parse_args(argv)
    console = Console()
    if options.part == "throughput":
        throughput(options.rounds, options.min_bytes, options.io_threads, console, sealed=options.integrity_key)
    else:
        hits(options.trace, options.engines, options.requests, console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
