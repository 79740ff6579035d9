"""FileTier faults: damaged or vanished files are misses with an event, failed writes fail the job."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from kvcontract import LookupResult, OffloadingEvent, OffloadKey, TierJob
from kvcontract.tiers import FileTier
from kvcontract.tiers.file import block_file
from kvcontract.tiers.file.block_dir import BlockDirectory
from kvcontract.tiers.file.block_file import BlockLocation
from kvcontract.tiers.integrity import ValueMac
from tests.tiers.support import BLOCK_BYTES, READ_BLOCK, WRITE_BLOCK, MakeTier, drain, fill, key, load, pattern, store


def path_of(tier: FileTier, k: OffloadKey) -> Path:
    """The file of ``k`` in ``tier``."""
    return Path(BlockDirectory(tier.root, tier.identity.fingerprint_hex).path_of(k))


def flip_payload(path: Path) -> None:
    """Flip one bit near the end of the payload."""
    data = bytearray(path.read_bytes())
    data[-7] ^= 0x01
    path.write_bytes(bytes(data))


DAMAGES: dict[str, Callable[[FileTier, Path], object]] = {
    "payload-bit": lambda tier, path: flip_payload(path),
    "truncated": lambda tier, path: os.truncate(path, path.stat().st_size - 1),
    "empty": lambda tier, path: os.truncate(path, 0),
    "other-key": lambda tier, path: shutil.copyfile(path_of(tier, key(0)), path),
    "deleted-by-another-process": lambda tier, path: path.unlink(),
}
"""Ways a block file can go bad under a tier that indexed it."""


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_block_fails_its_load_but_not_the_others(
    make_tier: MakeTier, host: torch.Tensor, job_ids: Iterator[int], damage: str
) -> None:
    tier = make_tier()
    keys = [key(0), key(1), key(2)]
    fill(host, [0, 1, 2], [0, 1, 2])
    store(tier, job_ids, keys, [0, 1, 2])
    tier.take_events()
    DAMAGES[damage](tier, path_of(tier, key(1)))
    host[8:11].fill_(0xAB)
    result = load(tier, job_ids, keys, [8, 9, 10])
    assert not result.success
    assert result.transfer_bytes == 2 * BLOCK_BYTES
    assert torch.equal(host[8], pattern(0)) and torch.equal(host[10], pattern(2))
    assert not host[9].any(), "the host block of a failed key must not keep stale or unverified data"
    assert tier.lookup(key(1)) is LookupResult.MISS
    assert tier.take_events() == [OffloadingEvent([key(1)], "FILE", removed=True)]
    assert not path_of(tier, key(1)).exists()
    assert [tier.lookup(k) for k in (key(0), key(2))] == [LookupResult.HIT] * 2
    assert load(tier, job_ids, [key(0), key(2)], [11, 12]).success


def test_a_failed_write_fails_only_that_key(
    make_tier: MakeTier, job_ids: Iterator[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail_key_1(
        at: BlockLocation, k: OffloadKey, payload: memoryview, *, fingerprint: bytes, mac: ValueMac | None = None
    ) -> None:
        if k == key(1):
            raise OSError(errno.EIO, "I/O error")
        block_file.write_block(at, k, payload, fingerprint=fingerprint, mac=mac)

    tier = make_tier()
    monkeypatch.setattr(WRITE_BLOCK, fail_key_1)
    result = store(tier, job_ids, [key(0), key(1)], [0, 1])
    assert not result.success
    assert result.transfer_bytes == BLOCK_BYTES
    assert tier.lookup(key(0)) is LookupResult.HIT
    assert tier.lookup(key(1)) is LookupResult.MISS
    assert len(tier) == 1
    assert tier.take_events() == [OffloadingEvent([key(0)], "FILE", removed=False)]
    monkeypatch.undo()
    assert store(tier, job_ids, [key(1)], [1]).success


def test_an_injected_write_fault_fails_the_store(
    make_tier: MakeTier, job_ids: Iterator[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(
        at: BlockLocation, k: OffloadKey, payload: memoryview, *, fingerprint: bytes, mac: ValueMac | None = None
    ) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(WRITE_BLOCK, disk_full)
    tier = make_tier()
    result = store(tier, job_ids, [key(0)], [0])
    assert not result.success and result.transfer_bytes == 0
    assert tier.lookup(key(0)) is LookupResult.MISS and len(tier) == 0
    assert tier.take_events() == []
    monkeypatch.undo()
    assert store(tier, job_ids, [key(0)], [0]).success


def test_an_unexpected_error_still_finishes_the_job(
    make_tier: MakeTier, host: torch.Tensor, job_ids: Iterator[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(
        at: BlockLocation, k: OffloadKey, out: memoryview, *, fingerprint: bytes, mac: ValueMac | None = None
    ) -> None:
        raise RuntimeError("bug")

    tier = make_tier()
    store(tier, job_ids, [key(0)], [0])
    monkeypatch.setattr(READ_BLOCK, broken)
    host[3].fill_(1)
    assert tier.submit_load(TierJob(5, [key(0)], [3]))
    assert not drain(tier, [5])[5].success
    assert not host[3].any()
    assert tier.lookup(key(0)) is LookupResult.MISS


def test_no_temporary_files_survive_failed_renames(
    make_tier: MakeTier, job_ids: Iterator[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(src: str, dst: str, **dir_fds: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    tier = make_tier()
    monkeypatch.setattr(os, "replace", refuse)
    assert not store(tier, job_ids, [key(i) for i in range(4)], [0, 1, 2, 3]).success
    monkeypatch.undo()
    assert [p for p in tier.root.rglob("*") if p.is_file()] == []
