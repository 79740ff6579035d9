"""Fixtures of the tier tests: host buffers, job ids, file tiers that shut down after the test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kvcontract import BlockIdentity, CachePolicy
from kvcontract.testing import example_identity
from kvcontract.tiers import FileTier
from tests.tiers.support import BLOCK_BYTES, HOST_BLOCKS, MakeTier


@pytest.fixture
def host() -> torch.Tensor:
    """A zeroed host buffer of ``HOST_BLOCKS`` blocks of ``BLOCK_BYTES`` bytes."""
    return torch.zeros((HOST_BLOCKS, BLOCK_BYTES), dtype=torch.uint8)


@pytest.fixture
def job_ids() -> Iterator[int]:
    """Fresh job ids."""
    return itertools.count(1)


@pytest.fixture
def make_tier(tmp_path: Path, host: torch.Tensor) -> Iterator[MakeTier]:
    """Builds tiers (on ``tmp_path/cache`` over ``host`` by default); shuts them down after the test."""
    tiers: list[FileTier] = []

    def make(
        capacity: int = 8,
        *,
        root: Path | None = None,
        host_blocks: torch.Tensor | None = None,
        policy: str | CachePolicy = "lru",
        io_threads: int = 4,
        enable_events: bool = True,
        identity: BlockIdentity | None = None,
        integrity_key: bytes | None = None,
    ) -> FileTier:
        blocks = host if host_blocks is None else host_blocks
        tier = FileTier(
            tmp_path / "cache" if root is None else root,
            capacity,
            blocks,
            identity=identity if identity is not None else example_identity(int(blocks.shape[-1])),
            policy=policy,
            io_threads=io_threads,
            enable_events=enable_events,
            integrity_key=integrity_key,
        )
        tiers.append(tier)
        return tier

    yield make
    for tier in tiers:
        tier.shutdown()
