"""FileTier basics: store and load, lookup states, results, events, layout, bad input, shutdown."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kvcontract import (
    BlockStatus,
    ContractViolation,
    LookupResult,
    OffloadingEvent,
    OffloadKey,
    TierJob,
)
from kvcontract.policies import LRUPolicy
from kvcontract.tiers.file import block_file
from kvcontract.tiers.file.block_dir import BlockDirectory
from kvcontract.tiers.file.block_file import BlockLocation
from kvcontract.tiers.integrity import ValueMac
from tests.tiers.support import (
    BLOCK_BYTES,
    READ_BLOCK,
    WRITE_BLOCK,
    Gate,
    MakeTier,
    drain,
    fill,
    key,
    load,
    pattern,
    store,
)


def test_loaded_blocks_equal_the_stored_ones(make_tier: MakeTier, host: torch.Tensor, job_ids: Iterator[int]) -> None:
    tier = make_tier()
    keys = [key(i) for i in range(4)]
    fill(host, [0, 1, 2, 3], [10, 11, 12, 13])
    stored = store(tier, job_ids, keys, [0, 1, 2, 3])
    assert stored.success and stored.transfer_bytes == 4 * BLOCK_BYTES
    assert stored.transfer_seconds > 0
    assert [tier.lookup(k) for k in keys] == [LookupResult.HIT] * 4
    loaded = load(tier, job_ids, keys[::-1], [8, 9, 10, 11])
    assert loaded.success and loaded.transfer_bytes == 4 * BLOCK_BYTES
    for host_id, seed in zip([8, 9, 10, 11], [13, 12, 11, 10]):
        assert torch.equal(host[host_id], pattern(seed))
    assert tier.get_finished() == []


def test_lookup_is_pending_while_the_store_runs(
    make_tier: MakeTier, job_ids: Iterator[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate()
    monkeypatch.setattr(WRITE_BLOCK, gate.wrap(block_file.write_block))
    tier = make_tier()
    assert tier.submit_store(TierJob(1, [key(0)], [0]))
    gate.wait_entered()
    assert tier.lookup(key(0)) is LookupResult.HIT_PENDING
    assert not tier.submit_load(TierJob(2, [key(0)], [1]))
    assert tier.get_finished() == []
    gate.open()
    assert drain(tier, [1])[1].success
    assert tier.lookup(key(0)) is LookupResult.HIT


def test_a_load_with_a_key_not_stored_is_refused(make_tier: MakeTier, job_ids: Iterator[int]) -> None:
    tier = make_tier()
    store(tier, job_ids, [key(0)], [0])
    assert tier.lookup(key(1)) is LookupResult.MISS
    assert not tier.submit_load(TierJob(7, [key(0), key(1)], [2, 3]))
    assert tier.get_finished() == []
    assert load(tier, job_ids, [key(0)], [2]).success


def test_storing_present_keys_writes_nothing(make_tier: MakeTier, job_ids: Iterator[int]) -> None:
    tier = make_tier()
    store(tier, job_ids, [key(0)], [0])
    tier.take_events()
    again = store(tier, job_ids, [key(0)], [1])
    assert again.success and again.transfer_bytes == 0 and again.transfer_seconds == 0.0
    assert tier.take_events() == []
    assert len(tier) == 1


def test_a_key_twice_in_one_store_is_written_once(
    make_tier: MakeTier, host: torch.Tensor, job_ids: Iterator[int]
) -> None:
    tier = make_tier()
    fill(host, [0, 1], [1, 2])
    result = store(tier, job_ids, [key(0), key(0)], [0, 1])
    assert result.success and result.transfer_bytes == BLOCK_BYTES
    load(tier, job_ids, [key(0)], [5])
    assert torch.equal(host[5], pattern(1))


def test_empty_jobs_finish_at_once(make_tier: MakeTier, job_ids: Iterator[int]) -> None:
    tier = make_tier()
    assert store(tier, job_ids, [], []).success
    assert load(tier, job_ids, [], []).success


def test_stored_keys_are_announced_in_job_order(make_tier: MakeTier, job_ids: Iterator[int]) -> None:
    tier = make_tier()
    keys = [key(i) for i in range(5)]
    store(tier, job_ids, keys, [0, 1, 2, 3, 4])
    assert tier.take_events() == [OffloadingEvent(keys, "FILE", removed=False)]
    assert tier.take_events() == []


def test_without_enable_events_nothing_is_recorded(
    make_tier: MakeTier, host: torch.Tensor, job_ids: Iterator[int]
) -> None:
    """Events nobody takes must not pile up: stores, evictions, corrupt loads and a restart record none."""
    tier = make_tier(capacity=2, enable_events=False)
    for i in range(50):
        store(tier, job_ids, [key(i)], [0])
    os.truncate(BlockDirectory(tier.root, tier.identity.fingerprint_hex).path_of(key(49)), 10)
    assert not load(tier, job_ids, [key(49)], [1]).success
    tier.shutdown()
    restarted = make_tier(capacity=2, enable_events=False)
    assert restarted.lookup(key(48)) is LookupResult.HIT
    assert tier.take_events() == [] and restarted.take_events() == []


def test_files_are_sharded_and_no_temporary_file_remains(
    make_tier: MakeTier, job_ids: Iterator[int], tmp_path: Path
) -> None:
    tier = make_tier()
    store(tier, job_ids, [key(i) for i in range(6)], list(range(6)))
    files = sorted(path.relative_to(tier.root) for path in tier.root.rglob("*") if path.is_file())
    assert len(files) == 6
    for path in files:
        identity, first, second, name = path.parts
        assert identity == tier.identity.fingerprint_hex
        assert len(first) == len(second) == 2
        assert name.startswith(first + second) and name.endswith(".kvb")


def test_touch_accepts_keys_not_stored(make_tier: MakeTier, job_ids: Iterator[int]) -> None:
    tier = make_tier()
    store(tier, job_ids, [key(0)], [0])
    tier.touch([key(5), key(0)])
    assert tier.lookup(key(0)) is LookupResult.HIT


def test_contract_calls_are_checked(make_tier: MakeTier) -> None:
    tier = make_tier()
    with pytest.raises(ContractViolation, match="pass a list or tuple"):
        tier.touch(key(i) for i in range(2))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def test_host_block_ids_out_of_range_are_rejected(make_tier: MakeTier) -> None:
    tier = make_tier()
    with pytest.raises(ValueError, match=r"host block ids \[16, 17\] are outside \[0, 16\)"):
        tier.submit_store(TierJob(1, [key(0), key(1), key(2)], [0, 16, 17]))
    with pytest.raises(ValueError, match="outside"):
        tier.submit_load(TierJob(2, [key(0)], [99]))


def test_a_job_id_in_flight_cannot_be_reused(
    make_tier: MakeTier, job_ids: Iterator[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate()
    monkeypatch.setattr(WRITE_BLOCK, gate.wrap(block_file.write_block))
    tier = make_tier()
    assert tier.submit_store(TierJob(1, [key(0)], [0]))
    with pytest.raises(ValueError, match="job id 1 is still in flight"):
        tier.submit_store(TierJob(1, [key(1)], [1]))
    gate.open()
    drain(tier, [1])
    assert tier.submit_store(TierJob(1, [key(1)], [1]))


@pytest.mark.parametrize(
    "bad_host",
    [
        torch.zeros((4, 16), dtype=torch.float32),
        torch.zeros(64, dtype=torch.uint8),
        torch.zeros((16, 4), dtype=torch.uint8).t(),
    ],
    ids=["dtype", "dims", "strided-rows"],
)
def test_the_host_buffer_is_checked(make_tier: MakeTier, bad_host: torch.Tensor) -> None:
    with pytest.raises(ValueError, match="2-D torch.uint8 CPU tensor"):
        make_tier(host_blocks=bad_host)


def test_constructor_arguments_are_checked(make_tier: MakeTier, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        make_tier(capacity=0)
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        make_tier(root=tmp_path / "file")
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        make_tier(policy="nope")
    used = LRUPolicy(4)
    used.insert(key(0), BlockStatus(0))
    with pytest.raises(ValueError, match="must be empty"):
        make_tier(policy=used)
    with pytest.raises(ValueError, match="at least one thread"):
        make_tier(io_threads=0)


def test_shutdown_finishes_jobs_in_flight_and_refuses_new_ones(make_tier: MakeTier, host: torch.Tensor) -> None:
    tier = make_tier(capacity=16, io_threads=2)
    for i in range(16):
        assert tier.submit_store(TierJob(i, [key(i)], [i]))
    tier.shutdown()
    results = tier.get_finished()
    assert sorted(r.job_id for r in results) == list(range(16))
    assert all(r.success for r in results)
    assert not tier.submit_store(TierJob(99, [key(99)], [0]))
    assert not tier.submit_load(TierJob(100, [key(0)], [0]))
    assert tier.lookup(key(3)) is LookupResult.HIT
    tier.shutdown()


def test_loads_run_before_queued_stores(
    make_tier: MakeTier, job_ids: Iterator[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    tier = make_tier(io_threads=1)
    store(tier, job_ids, [key(0)], [0])
    order: list[str] = []
    gate = Gate()

    def write(
        at: BlockLocation, k: OffloadKey, payload: memoryview, *, fingerprint: bytes, mac: ValueMac | None = None
    ) -> None:
        order.append(f"store {k[7]}")
        block_file.write_block(at, k, payload, fingerprint=fingerprint, mac=mac)

    def read(
        at: BlockLocation, k: OffloadKey, out: memoryview, *, fingerprint: bytes, mac: ValueMac | None = None
    ) -> None:
        order.append(f"load {k[7]}")
        block_file.read_block(at, k, out, fingerprint=fingerprint, mac=mac)

    monkeypatch.setattr(WRITE_BLOCK, gate.wrap(write))
    monkeypatch.setattr(READ_BLOCK, read)
    assert tier.submit_store(TierJob(10, [key(1)], [1]))
    gate.wait_entered()
    assert tier.submit_store(TierJob(11, [key(2), key(3)], [2, 3]))
    assert tier.submit_load(TierJob(12, [key(0)], [4]))
    gate.open()
    assert all(r.success for r in drain(tier, [10, 11, 12]).values())
    assert order == ["store 1", "load 0", "store 2", "store 3"]


def test_root_is_created(make_tier: MakeTier, tmp_path: Path) -> None:
    tier = make_tier(root=tmp_path / "a" / "b")
    assert tier.root.is_dir() and os.listdir(tier.root) == [tier.identity.fingerprint_hex]
    assert os.listdir(tier.root / tier.identity.fingerprint_hex) == []
    assert "capacity=8" in repr(tier)
