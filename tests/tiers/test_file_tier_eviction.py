"""FileTier capacity and eviction: victims by policy, never a block being written or read."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from kvcontract import LookupResult, OffloadingEvent, TierJob
from kvcontract.policies import available_policies
from kvcontract.tiers import FileTier
from kvcontract.tiers.file import block_file
from kvcontract.tiers.file.block_dir import BlockDirectory
from tests.tiers.support import (
    DELETE_BLOCK,
    FINGERPRINT,
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


def block_files(tier: FileTier) -> int:
    """How many block files the tier's root holds."""
    return sum(1 for _ in tier.root.rglob("*.kvb"))


def removed_keys(tier: FileTier) -> list[bytes]:
    """Keys of the removal events since the last call."""
    return [k for event in tier.take_events() if event.removed for k in event.keys]


def test_lru_evicts_the_least_recently_used_and_deletes_its_file(make_tier: MakeTier, job_ids: Iterator[int]) -> None:
    tier = make_tier(capacity=4)
    for i in range(4):
        store(tier, job_ids, [key(i)], [i])
    tier.touch([key(0)])
    tier.take_events()
    store(tier, job_ids, [key(4)], [4])
    assert tier.lookup(key(1)) is LookupResult.MISS
    assert [tier.lookup(key(i)) for i in (0, 2, 3, 4)] == [LookupResult.HIT] * 4
    assert tier.take_events() == [
        OffloadingEvent([key(1)], "FILE", removed=True),
        OffloadingEvent([key(4)], "FILE", removed=False),
    ]
    tier.shutdown()
    assert block_files(tier) == 4 == len(tier)


@pytest.mark.parametrize("policy", available_policies())
def test_a_full_tier_evicts_a_stored_chain_from_its_tail(
    make_tier: MakeTier, job_ids: Iterator[int], policy: str
) -> None:
    tier = make_tier(capacity=4, policy=policy)
    chain = [key(i) for i in range(4)]
    store(tier, job_ids, chain, [0, 1, 2, 3])
    store(tier, job_ids, [key(4), key(5)], [4, 5])
    assert [tier.lookup(k) for k in chain] == [LookupResult.HIT] * 2 + [LookupResult.MISS] * 2


def test_a_store_larger_than_the_capacity_is_refused(make_tier: MakeTier) -> None:
    tier = make_tier(capacity=2)
    assert not tier.submit_store(TierJob(1, [key(0), key(1), key(2)], [0, 1, 2]))
    assert tier.get_finished() == [] and len(tier) == 0


def test_keys_of_the_store_are_never_its_victims(make_tier: MakeTier, job_ids: Iterator[int]) -> None:
    tier = make_tier(capacity=2)
    store(tier, job_ids, [key(0)], [0])
    assert not tier.submit_store(TierJob(9, [key(0), key(1), key(2)], [0, 1, 2]))
    assert tier.lookup(key(0)) is LookupResult.HIT and len(tier) == 1


def test_a_block_being_written_is_not_evicted(
    make_tier: MakeTier, job_ids: Iterator[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate()
    monkeypatch.setattr(WRITE_BLOCK, gate.wrap(block_file.write_block))
    tier = make_tier(capacity=1)
    assert tier.submit_store(TierJob(1, [key(0)], [0]))
    gate.wait_entered()
    assert not tier.submit_store(TierJob(2, [key(1)], [1]))
    gate.open()
    drain(tier, [1])
    assert store(tier, job_ids, [key(1)], [1]).success
    assert tier.lookup(key(0)) is LookupResult.MISS


def test_a_block_being_read_is_not_evicted(
    make_tier: MakeTier, job_ids: Iterator[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    tier = make_tier(capacity=2)
    store(tier, job_ids, [key(0)], [0])
    store(tier, job_ids, [key(1)], [1])
    gate = Gate()
    monkeypatch.setattr(READ_BLOCK, gate.wrap(block_file.read_block))
    assert tier.submit_load(TierJob(10, [key(0)], [5]))
    gate.wait_entered()
    store(tier, job_ids, [key(2)], [2])
    assert tier.lookup(key(1)) is LookupResult.MISS
    assert tier.lookup(key(0)) is LookupResult.HIT
    assert not tier.submit_store(TierJob(11, [key(3), key(4)], [3, 4]))
    gate.open()
    assert drain(tier, [10])[10].success
    assert store(tier, job_ids, [key(3), key(4)], [3, 4]).success
    assert tier.lookup(key(0)) is LookupResult.MISS


def test_a_key_stored_again_waits_for_the_deletion_of_its_old_file(
    make_tier: MakeTier, host: torch.Tensor, job_ids: Iterator[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    tier = make_tier(capacity=1, io_threads=3)
    fill(host, [0, 1, 2], [100, 101, 102])
    store(tier, job_ids, [key(0)], [0])
    gate = Gate()
    monkeypatch.setattr(DELETE_BLOCK, gate.wrap(block_file.delete_block))
    store(tier, job_ids, [key(1)], [1])
    gate.wait_entered()
    assert tier.submit_store(TierJob(50, [key(0)], [2]))
    gate.wait_entered()
    assert tier.lookup(key(0)) is LookupResult.HIT_PENDING
    old = bytearray(host.shape[1])
    with BlockDirectory(tier.root, tier.identity.fingerprint_hex).locate(key(0)) as location:
        block_file.read_block(location, key(0), memoryview(old), fingerprint=FINGERPRINT)
    assert torch.equal(torch.frombuffer(old, dtype=torch.uint8), pattern(100)), (
        "the new content was written before the old file was deleted"
    )
    gate.open()
    assert drain(tier, [50])[50].success
    assert load(tier, job_ids, [key(0)], [3]).success
    assert torch.equal(host[3], pattern(102))
    tier.shutdown()
    assert block_files(tier) == 1


@pytest.mark.parametrize("policy", available_policies())
def test_every_registered_policy_keeps_the_capacity(
    make_tier: MakeTier, host: torch.Tensor, job_ids: Iterator[int], policy: str
) -> None:
    tier = make_tier(capacity=4, policy=policy)
    fill(host, range(8), range(8))
    for i in range(8):
        assert store(tier, job_ids, [key(i)], [i]).success
    present = [i for i in range(8) if tier.lookup(key(i)) is LookupResult.HIT]
    assert len(present) == len(tier) == 4
    assert sorted(removed_keys(tier)) == sorted(key(i) for i in range(8) if i not in present)
    assert load(tier, job_ids, [key(i) for i in present], [8, 9, 10, 11]).success
    for host_id, i in zip([8, 9, 10, 11], present):
        assert torch.equal(host[host_id], pattern(i))
    tier.shutdown()
    assert block_files(tier) == 4
