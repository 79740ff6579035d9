"""FileTier restarts: the index rebuilt from disk, stale files cleaned, two processes sharing a root."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch

from kvcontract import LookupResult, OffloadingEvent, TierJob
from kvcontract.tiers import FileTier
from kvcontract.tiers.file.block_dir import STALE_TEMP_SECONDS, BlockDirectory
from tests.tiers.support import BLOCK_BYTES, IDENTITY, MakeTier, drain, fill, key, load, pattern, store

REPO = Path(__file__).resolve().parents[2]


def run_worker(*args: object) -> subprocess.Popen[str]:
    """Start ``tests.tiers.restart_worker`` in a new Python process."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.tiers.restart_worker", *map(str, args)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> str:
    """Wait for ``process``; it must succeed. Its output."""
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output
    return output


def test_blocks_survive_a_restart(make_tier: MakeTier, host: torch.Tensor, job_ids: Iterator[int]) -> None:
    first = make_tier()
    fill(host, [0, 1, 2], [0, 1, 2])
    store(first, job_ids, [key(0), key(1), key(2)], [0, 1, 2])
    first.shutdown()
    second = make_tier()
    assert len(second) == 3
    events = second.take_events()
    assert len(events) == 1 and not events[0].removed
    assert sorted(events[0].keys) == sorted([key(0), key(1), key(2)])
    assert load(second, job_ids, [key(2), key(0)], [8, 9]).success
    assert torch.equal(host[8], pattern(2)) and torch.equal(host[9], pattern(0))


def restart_with_mtimes(make_tier: MakeTier, job_ids: Iterator[int], stamps: list[int]) -> FileTier:
    """Store ``key(i)`` for each of ``stamps``, give its file the mtime ``stamps[i]``, and restart at capacity 3."""
    first = make_tier(capacity=8)
    store(first, job_ids, [key(i) for i in range(len(stamps))], list(range(len(stamps))))
    first.shutdown()
    directory = BlockDirectory(first.root, first.identity.fingerprint_hex)
    for i, stamp in enumerate(stamps):
        os.utime(directory.path_of(key(i)), (stamp, stamp))
    return make_tier(capacity=3)


def test_a_restart_keeps_the_newest_blocks_that_fit(make_tier: MakeTier, job_ids: Iterator[int]) -> None:
    second = restart_with_mtimes(make_tier, job_ids, [1_000_000 + (i if i != 1 else 100) for i in range(6)])
    assert [i for i in range(6) if second.lookup(key(i)) is LookupResult.HIT] == [1, 4, 5]
    assert sum(1 for _ in second.root.rglob("*.kvb")) == 3
    store(second, job_ids, [key(9)], [9])
    assert second.lookup(key(4)) is LookupResult.MISS, "the oldest kept block is least recently used"


def test_blocks_with_the_same_mtime_are_ordered_by_key(make_tier: MakeTier, job_ids: Iterator[int]) -> None:
    """Files written within one clock tick share an mtime; the key orders them, not the directory."""
    second = restart_with_mtimes(make_tier, job_ids, [1_000_000] * 6)
    by_key = sorted(key(i) for i in range(6))
    assert sorted(k for k in by_key if second.lookup(k) is LookupResult.HIT) == by_key[3:]
    store(second, job_ids, [key(9)], [9])
    assert second.lookup(by_key[3]) is LookupResult.MISS, "the smallest kept key is least recently used"


def test_the_scan_drops_bad_files_and_ignores_foreign_ones(make_tier: MakeTier, job_ids: Iterator[int]) -> None:
    first = make_tier()
    store(first, job_ids, [key(0), key(1), key(2)], [0, 1, 2])
    first.shutdown()
    directory = BlockDirectory(first.root, first.identity.fingerprint_hex)
    os.truncate(directory.path_of(key(0)), 100)
    misplaced = Path(directory.path_of(key(3)))
    misplaced.parent.mkdir(parents=True, exist_ok=True)
    misplaced.write_bytes(Path(directory.path_of(key(1))).read_bytes())
    small = torch.zeros((2, BLOCK_BYTES // 2), dtype=torch.uint8)
    other_size = make_tier(host_blocks=small)
    assert len(other_size) == 0, "blocks of another size are not indexed"
    other_size.shutdown()
    assert Path(directory.path_of(key(1))).exists(), "blocks of another size are left alone"
    second = make_tier()
    assert [second.lookup(key(i)) for i in range(4)] == [
        LookupResult.MISS,
        LookupResult.HIT,
        LookupResult.HIT,
        LookupResult.MISS,
    ]
    assert not Path(directory.path_of(key(0))).exists()
    assert misplaced.exists()


def test_stale_temporary_files_are_removed_at_start(make_tier: MakeTier, tmp_path: Path) -> None:
    shard = tmp_path / "cache" / IDENTITY.fingerprint_hex / "ab" / "cd"
    shard.mkdir(parents=True)
    dead_pid = _a_finished_pid()
    names = {
        "dead-writer": f".{dead_pid}.0123.tmp",
        "old": f".{os.getpid()}.4567.tmp",
        "live": f".{os.getpid()}.89ab.tmp",
        "not-ours": ".notes.tmp",
    }
    for name in names.values():
        (shard / name).write_bytes(b"partial")
    old = time.time() - STALE_TEMP_SECONDS - 10
    os.utime(shard / names["old"], (old, old))
    make_tier()
    assert sorted(os.listdir(shard)) == sorted([names["live"], names["not-ours"]])


def _a_finished_pid() -> int:
    """The pid of a process that has exited."""
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return process.pid


def test_a_restart_across_two_processes(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    assert "ok" in finish(run_worker("store", root, 0, 12))
    assert "verify 12 blocks from 0: ok" in finish(run_worker("verify", root, 0, 12))


def test_processes_writing_one_root_at_once(tmp_path: Path) -> None:
    """Two writers store overlapping keys concurrently; a third process reads every block intact."""
    root = tmp_path / "shared"
    writers = [run_worker("store", root, 0, 48), run_worker("store", root, 24, 48)]
    for writer in writers:
        finish(writer)
    assert "verify 72 blocks from 0: ok" in finish(run_worker("verify", root, 0, 72))
    assert not [p for p in root.rglob("*.tmp")]


def test_a_block_another_tier_evicted_reads_as_a_miss(make_tier: MakeTier, job_ids: Iterator[int]) -> None:
    writer = make_tier(capacity=1)
    store(writer, job_ids, [key(0)], [0])
    reader = make_tier(capacity=4)
    assert reader.lookup(key(0)) is LookupResult.HIT
    store(writer, job_ids, [key(1)], [1])
    writer.shutdown()
    assert reader.lookup(key(1)) is LookupResult.MISS, "lookup does not read the disk"
    reader.take_events()
    assert reader.submit_load(TierJob(100, [key(0)], [5]))
    assert not drain(reader, [100])[100].success
    assert reader.take_events() == [OffloadingEvent([key(0)], "FILE", removed=True)]
    assert reader.lookup(key(0)) is LookupResult.MISS
