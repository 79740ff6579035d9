"""The Mooncake tier's throughput against Mooncake's raw client, and its cross-engine hit ratio on the shipped trace.

``python tools/bench_mooncake_tier.py throughput`` starts a fresh Mooncake Store (master,
metadata server and a segment process, on free loopback ports) and, for 64 KiB, 512 KiB and
2 MiB blocks in jobs of 16 and 64 blocks (``--block-kib`` picks sizes), times the tier's store
and load jobs (wall clock, since the bytes cross a socket to the segment process, and the
process's CPU time, which holds the tier's I/O threads and the client's own threads) against the raw client's ``batch_put_from``
and ``batch_get_into`` of the same bytes, one batch per job, from a buffer registered the
same way, in the same process. Tier and raw alternate round by round (which goes first
alternates too); the table gives the median of the per-round ratios, and a line per cell
gives every round's. ``--zero-copy-from KIB`` moves the tier's threshold between copied
values and values of two pieces. Each timed run moves
at least ``--min-bytes``; the store is emptied between rounds.

``python tools/bench_mooncake_tier.py hits`` deals the trace's requests round-robin to two
simulated engines (``kvcontract.sim.multi_engine``), each with host memory for 2 % of the
unique blocks, sharing one store whose segment holds 50 % of them (values of one block and
its header each), and prints the hit ratio over all requests. Every loaded block is
verified byte for byte.
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

import torch
from rich.console import Console
from rich.table import Table

from kvcontract import OffloadKey, SecondaryTier, TierJob, make_offload_key
from kvcontract.config import load_config
from kvcontract.sim.multi_engine import print_engines_report, run_engines
from kvcontract.sim.shipped import shipped_trace
from kvcontract.sim.trace import read_trace
from kvcontract.testing import example_identity
from kvcontract.tiers import MooncakeTier
from kvcontract.tiers.mooncake import tier as mooncake_tier
from kvcontract.tiers.remote_tier import RemoteTierOptions
from kvcontract.tiers.store_value import header_size
from tests.tiers.mooncake.support import MooncakeStore, RawStore

BLOCK_SIZES = (64 << 10, 512 << 10, 2 << 20)
JOB_BLOCKS = (16, 64)
TRACE = shipped_trace("mooncake-conversation")
_POLL_SECONDS = 0.001
_KEY_BYTES = 20
"""Bytes of the benchmark's keys: a 16-byte hash and the group index."""


def _wait(tier: SecondaryTier, job_ids: Sequence[int]) -> None:
    pending = set(job_ids)
    while pending:
        for result in tier.get_finished():
            if not result.success:
                raise RuntimeError(f"job {result.job_id} failed")
            pending.discard(result.job_id)
        if pending:
            time.sleep(_POLL_SECONDS)


def _timed(run: Callable[[], None]) -> tuple[float, float]:
    """Wall seconds and CPU seconds of this process (the tier's I/O threads and the client's threads included) of ``run``."""
    started, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - started, time.process_time() - cpu


def throughput(
    rounds: int,
    min_bytes: int,
    io_threads: int,
    block_sizes: Sequence[int],
    console: Console,
    *,
    sealed: bool = False,
    job_deadline: float | None = None,
) -> None:
    """Median tier/raw ratios of store and load throughput (wall clock and process CPU) for every block size and job size.

    ``sealed``: the tier's values carry a MAC (an integrity key) instead of the checksum. ``job_deadline``: the
    tier's, under which every load is copied through a registered slot instead of going zero copy."""
    if job_deadline is None:
        console.print(f"blocks of {mooncake_tier.ZERO_COPY_FROM >> 10} KiB and more go zero copy (two pieces a value)")
    else:
        console.print(f"job_deadline {job_deadline:g} s: loads copied through a slot whatever the block size")
    values = "values sealed with an integrity key (BLAKE3 MAC)" if sealed else "values with the xxh3 checksum"
    table = Table(title=f"Mooncake tier against the raw client ({rounds} interleaved rounds, median), {values}")
    for column in (
        "block",
        "job",
        "store GB/s tier",
        "raw",
        "ratio",
        "CPU ratio",
        "load GB/s tier",
        "raw",
        "ratio",
        "CPU ratio",
    ):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as workdir:
        store = MooncakeStore(Path(workdir), segment_bytes=4 * min_bytes + (256 << 20), lease_ms=10_000)
        raw = store.raw()
        try:
            for block_bytes, job_blocks in itertools.product(block_sizes, JOB_BLOCKS):
                row = _measure(
                    store,
                    raw,
                    block_bytes,
                    job_blocks,
                    rounds,
                    min_bytes,
                    RemoteTierOptions(io_threads=io_threads, job_deadline=job_deadline),
                    sealed,
                )
                table.add_row(f"{block_bytes >> 10} KiB", str(job_blocks), *row)
                console.print(f"measured {block_bytes >> 10} KiB blocks in jobs of {job_blocks}")
        finally:
            raw.close()
            store.close()
    console.print(table)


def _measure(
    store: MooncakeStore,
    raw: RawStore,
    block_bytes: int,
    job_blocks: int,
    rounds: int,
    min_bytes: int,
    options: RemoteTierOptions,
    sealed: bool,
) -> list[str]:
    jobs = max(1, min_bytes // (block_bytes * job_blocks))
    host = torch.randint(0, 256, (jobs * job_blocks, block_bytes), dtype=torch.uint8)
    raw_host = host.clone()
    expected = host.clone()
    raw.register_buffer(raw_host.data_ptr(), raw_host.numel())
    rows = [[raw_host[j * job_blocks + i].data_ptr() for i in range(job_blocks)] for j in range(jobs)]
    sizes = [block_bytes] * job_blocks
    tier = MooncakeTier(
        host,
        identity=example_identity(block_bytes),
        client=store.client(timeout=30.0),
        integrity_key=os.urandom(32) if sealed else None,
        options=options,
    )
    job_ids = itertools.count(1)
    ratios: dict[str, list[float]] = {"store": [], "load": [], "store cpu": [], "load cpu": []}
    rates: dict[str, list[float]] = {"store tier": [], "store raw": [], "load tier": [], "load raw": []}
    total = jobs * job_blocks * block_bytes
    try:
        for round_ in range(rounds):
            raw.remove_all(True)
            keys = [[_key(round_, j, i) for i in range(job_blocks)] for j in range(jobs)]
            raw_names = [[f"raw:{k.hex()}" for k in job] for job in keys]

            def tier_store() -> None:
                submitted = [next(job_ids) for _ in keys]
                for j, (job_id, job) in enumerate(zip(submitted, keys)):
                    assert tier.submit_store(TierJob(job_id, job, range(j * job_blocks, (j + 1) * job_blocks)))
                _wait(tier, submitted)

            def tier_load() -> None:
                submitted = [next(job_ids) for _ in keys]
                for j, (job_id, job) in enumerate(zip(submitted, keys)):
                    assert tier.submit_load(TierJob(job_id, job, range(j * job_blocks, (j + 1) * job_blocks)))
                _wait(tier, submitted)

            def raw_store() -> None:
                for names, job_rows in zip(raw_names, rows):
                    assert all(code == 0 for code in raw.batch_put_from(names, job_rows, sizes))

            def raw_load() -> None:
                for names, job_rows in zip(raw_names, rows):
                    assert all(code == block_bytes for code in raw.batch_get_into(names, job_rows, sizes))

            first, second = ((tier_store, raw_store), (raw_store, tier_store))[round_ % 2]
            seconds = {fn: _timed(fn) for fn in (first, second)}
            first, second = ((tier_load, raw_load), (raw_load, tier_load))[round_ % 2]
            seconds.update({fn: _timed(fn) for fn in (first, second)})
            for what, tier_fn, raw_fn in (("store", tier_store, raw_store), ("load", tier_load, raw_load)):
                (tier_wall, tier_cpu), (raw_wall, raw_cpu) = seconds[tier_fn], seconds[raw_fn]
                ratios[what].append(raw_wall / tier_wall)
                ratios[f"{what} cpu"].append(raw_cpu / tier_cpu)
                rates[f"{what} tier"].append(total / tier_wall / 1e9)
                rates[f"{what} raw"].append(total / raw_wall / 1e9)
        print(
            f"{block_bytes >> 10} KiB x {job_blocks}: per-round ratios "
            + "; ".join(f"{what} " + " ".join(f"{ratio:.2f}" for ratio in values) for what, values in ratios.items())
        )
        if not (torch.equal(host, expected) and torch.equal(raw_host, expected)):
            raise RuntimeError("the loads did not give back the bytes stored")
    finally:
        tier.shutdown()
    median = statistics.median
    return [
        f"{median(rates['store tier']):.2f}",
        f"{median(rates['store raw']):.2f}",
        f"{median(ratios['store']):.2f}",
        f"{median(ratios['store cpu']):.2f}",
        f"{median(rates['load tier']):.2f}",
        f"{median(rates['load raw']):.2f}",
        f"{median(ratios['load']):.2f}",
        f"{median(ratios['load cpu']):.2f}",
    ]


def _key(round_: int, job: int, block: int) -> OffloadKey:
    return make_offload_key(f"{round_}:{job}:{block}".encode().ljust(16, b"."))


def hits(trace: Path, engines: int, requests: int | None, console: Console) -> None:
    """The hit ratio of ``engines`` engines sharing one Mooncake Store on the trace."""
    served = [list(request.hash_ids) for request in read_trace(trace)][:requests]
    unique = len({block for request in served for block in request})
    host_blocks = max(1, unique * 2 // 100)
    store_blocks = unique // 2
    layout = {"preset": "tiny", "block_tokens": 16, "offload_block_tokens": 16}
    block_bytes = load_config(base={"kv_layout": layout}).kv_layout.offload_block_bytes
    value_bytes = block_bytes + header_size(make_offload_key(bytes(_KEY_BYTES - 4)))
    with tempfile.TemporaryDirectory() as workdir:
        store = MooncakeStore(Path(workdir), segment_bytes=store_blocks * value_bytes, lease_ms=10_000)
        try:
            config = load_config(
                base={
                    "kv_layout": layout,
                    "manager": {
                        "kind": "tiering",
                        "primary": {"kind": "cpu", "capacity": host_blocks, "policy": {"kind": "lru"}},
                        "secondary": [{**store.tier_config(), "namespace": "bench"}],
                    },
                }
            )
            console.print(
                f"{len(served):,} requests, {unique:,} unique blocks; host memory {host_blocks:,} blocks per "
                f"engine; one Mooncake segment of {store.segment_bytes / 2**20:.1f} MiB = {store_blocks:,} values "
                f"of {value_bytes:,} bytes"
            )
            report = run_engines(config, served, engines)
        finally:
            store.close()
    print_engines_report(report, console=console)
    console.print(f"hit ratio over all requests: {report.hit_ratio:.4f} in {report.seconds:.0f} s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="part", required=True)
    speed = commands.add_parser("throughput", help="tier against the raw client, per block and job size")
    speed.add_argument("--rounds", type=int, default=5)
    speed.add_argument("--min-bytes", type=int, default=64 << 20, help="bytes moved per timed run")
    speed.add_argument("--io-threads", type=int, default=4)
    speed.add_argument("--block-kib", type=int, nargs="+", help="block sizes in KiB (default: 64 512 2048)")
    speed.add_argument(
        "--zero-copy-from",
        type=int,
        metavar="KIB",
        help="send blocks of this many KiB and more as two pieces, the others copied beside their header "
        f"(the tier's own threshold: {mooncake_tier.ZERO_COPY_FROM >> 10})",
    )
    speed.add_argument("--integrity-key", action="store_true", help="seal values with a MAC instead of the checksum")
    speed.add_argument("--job-deadline", type=float, metavar="SECONDS", help="the tier's job_deadline (default: none)")
    shared = commands.add_parser("hits", help="cross-engine hit ratio on the trace")
    shared.add_argument("--trace", type=Path, default=TRACE)
    shared.add_argument("--engines", type=int, default=2)
    shared.add_argument("--requests", type=int, help="the first N requests (default: all)")
    options = parser.parse_args(argv)
    console = Console()
    if options.part == "throughput":
        if options.zero_copy_from is not None:
            mooncake_tier.ZERO_COPY_FROM = options.zero_copy_from << 10
        sizes = [kib << 10 for kib in options.block_kib] if options.block_kib else BLOCK_SIZES
        throughput(
            options.rounds,
            options.min_bytes,
            options.io_threads,
            sizes,
            console,
            sealed=options.integrity_key,
            job_deadline=options.job_deadline,
        )
    else:
        hits(options.trace, options.engines, options.requests, console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
