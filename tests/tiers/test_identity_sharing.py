"""Engines of many identities on one file-tier root: side by side, none ever reads another's blocks."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis.stateful import run_state_machine_as_test
from typing_extensions import override

from kvcontract import BlockIdentity, LookupResult, SecondaryTier, TierJob
from kvcontract.assembly import build_tier
from kvcontract.config import FileTierConfig, KVContractConfig
from kvcontract.managers import CPUOffloadingManager, TieringOffloadingManager
from kvcontract.metrics import MetricsCollector, manager_source
from kvcontract.tiers import FileTier
from kvcontract.tiers.file import block_file
from tests.metrics.support import value_of
from tests.profiles import stateful_settings
from tests.tiers.support import (
    MakeTier,
    SharedTierMachine,
    drain,
    fill,
    key,
    load,
    loads_exactly,
    pattern,
    store,
    store_all,
)

_SHAPE = {"num_layers": 2, "num_kv_heads": 2, "head_dim": 32, "dtype": "bfloat16"}
ENGINES: dict[str, dict[str, object]] = {
    "bfloat16": {"kv_layout": _SHAPE},
    "float16": {"kv_layout": {**_SHAPE, "dtype": "float16"}},
    "layers-and-heads-swapped": {"kv_layout": {**_SHAPE, "num_layers": 4, "num_kv_heads": 1}},
    "other-model": {"kv_layout": _SHAPE, "identity": {"model": "other/model"}},
    "other-tp-rank": {"kv_layout": _SHAPE, "identity": {"tp_size": 2, "tp_rank": 1}},
}
"""Engine configs whose offload blocks all hold the same bytes: only the identity tells them apart."""
KEYS = 8


def engine_config(name: str) -> KVContractConfig:
    return KVContractConfig.model_validate(
        {**ENGINES[name], "manager": {"kind": "tiering", "primary": {"capacity": KEYS}}}
    )


def engine_tier(name: str, root: Path) -> tuple[FileTier, torch.Tensor]:
    """The file tier an engine of config ``name`` builds on ``root``, and the host memory of its own it made."""
    config = engine_config(name)
    host = torch.zeros((KEYS, config.kv_layout.offload_block_bytes), dtype=torch.uint8)
    tier = build_tier(FileTierConfig(path=root, capacity=KEYS), config, host)
    assert isinstance(tier, FileTier)
    return tier, host


def test_the_engines_hold_blocks_of_one_size() -> None:
    sizes = {engine_config(name).kv_layout.offload_block_bytes for name in ENGINES}
    fingerprints = {engine_config(name).block_identity().fingerprint for name in ENGINES}
    assert len(sizes) == 1 and len(fingerprints) == len(ENGINES)


@pytest.mark.parametrize("second", sorted(set(ENGINES) - {"bfloat16"}))
def test_a_second_engine_gets_no_hit_from_the_first_and_each_restart_reuses_its_own(
    tmp_path: Path, second: str
) -> None:
    root = tmp_path / "shared"
    first, first_host = engine_tier("bfloat16", root)
    store_all(first, first_host, seed=100)
    first.shutdown()
    other, other_host = engine_tier(second, root)
    assert [other.lookup(key(i)) for i in range(KEYS)] == [LookupResult.MISS] * KEYS
    store_all(other, other_host, seed=200)
    other.shutdown()
    (first_again, first_host), (other_again, other_host) = engine_tier("bfloat16", root), engine_tier(second, root)
    try:
        assert loads_exactly(first_again, first_host, seed=100) and loads_exactly(other_again, other_host, seed=200)
        assert first_again.stats().identity_mismatches == other_again.stats().identity_mismatches == 0
    finally:
        first_again.shutdown()
        other_again.shutdown()


def test_capacity_and_eviction_count_only_each_identity_s_own_blocks(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    names = ["bfloat16", "float16"]
    for name in names:
        config = engine_config(name)
        host = torch.zeros((KEYS, config.kv_layout.offload_block_bytes), dtype=torch.uint8)
        tier = build_tier(FileTierConfig(path=root, capacity=3), config, host)
        assert isinstance(tier, FileTier)
        for i in range(6):
            assert tier.submit_store(TierJob(i, [key(i)], [i]))
            drain(tier, [i])
        assert len(tier) == 3
        tier.shutdown()
    for name in names:
        config = engine_config(name)
        host = torch.zeros((KEYS, config.kv_layout.offload_block_bytes), dtype=torch.uint8)
        tier = build_tier(FileTierConfig(path=root, capacity=3), config, host)
        assert isinstance(tier, FileTier)
        assert len(tier) == 3, f"{name} keeps its own three newest blocks"
        assert [tier.lookup(key(i)) for i in range(6)] == [LookupResult.MISS] * 3 + [LookupResult.HIT] * 3
        tier.shutdown()
    assert len(list(root.iterdir())) == 2, "a directory per identity"


def _format_1_file(path: Path, k: bytes, payload: bytes) -> None:
    """A block file as format 1 wrote it: no fingerprint, under ``root/ab/cd/``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    checksum = block_file.checksum(memoryview(payload))
    path.write_bytes(struct.pack("<4sHHQQ", b"KVCB", 1, len(k), len(payload), checksum) + k + payload)


def test_a_root_of_format_1_reads_as_misses_and_its_blocks_are_removed(
    make_tier: MakeTier, host: torch.Tensor, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "cache"
    for i in range(4):
        _format_1_file(root / f"{i:02x}" / "cd" / f"{i:02x}cd{i}.kvb", key(i), bytes(pattern(i).numpy()))
    with caplog.at_level(logging.INFO, logger="kvcontract.tiers.file.tier"):
        tier = make_tier(capacity=4)
    assert len(tier) == 0 and [tier.lookup(key(i)) for i in range(4)] == [LookupResult.MISS] * 4
    assert sorted(p.name for p in root.iterdir()) == [tier.identity.fingerprint_hex], "format 1 shards are gone"
    assert "block format 1" in caplog.text
    job_ids = iter(range(1, 100))
    fill(host, [0, 1, 2, 3], [10, 11, 12, 13])
    assert store(tier, job_ids, [key(i) for i in range(4)], [0, 1, 2, 3]).success, "the whole capacity is free"


def test_a_block_of_another_identity_in_this_one_s_directory_is_a_miss_counted_and_logged_once(
    make_tier: MakeTier, host: torch.Tensor, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ours = make_tier(capacity=8)
    job_ids = iter(range(1, 100))
    fill(host, [0, 1], [1, 2])
    assert store(ours, job_ids, [key(1), key(2)], [0, 1]).success
    collector = MetricsCollector()
    collector.add(manager_source(TieringOffloadingManager(CPUOffloadingManager(4), [ours])))
    foreign = tmp_path / "foreign"
    other = make_tier(capacity=8, root=foreign, identity=dataclasses.replace(ours.identity, model="x"))
    fill(host, [2, 3], [3, 4])
    assert store(other, job_ids, [key(1), key(2)], [2, 3]).success
    for i in (1, 2):
        shutil.copyfile(other.block_path(key(i)), ours.block_path(key(i)))
    with caplog.at_level(logging.WARNING, logger="kvcontract.tiers.file.tier"):
        for i in (1, 2):
            host[4].fill_(7)
            assert not load(ours, job_ids, [key(i)], [4]).success
            assert not host[4].any(), "never another identity's bytes in a host block"
    assert ours.stats().identity_mismatches == 2
    assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == 1
    assert sum("another block identity" in r.getMessage() for r in caplog.records) == 1
    assert ours.lookup(key(1)) is LookupResult.MISS and not ours.block_path(key(1)).exists()
    assert value_of(collector, "kvcontract_identity_mismatches_total", {"tier": "1:FileTier"}) == 2


@pytest.fixture
def shared_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="kvcontract-identities-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_no_load_ever_returns_a_block_of_another_identity(shared_root: Path) -> None:
    roots = itertools.count()

    class FileMachine(SharedTierMachine):
        def __init__(self) -> None:
            self.root = shared_root / str(next(roots))
            super().__init__()

        @override
        def make_tier(self, identity: BlockIdentity, host: torch.Tensor) -> SecondaryTier:
            return FileTier(self.root, 3, host, identity=identity, io_threads=1)

    run_state_machine_as_test(FileMachine, settings=stateful_settings(steps=30, fast_examples=15))
