"""Assembly checks the whole: host memory too small for what the managers address is refused up front."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kvcontract.assembly import build_manager
from kvcontract.config import ConfigError, KVContractConfig

CAPACITY = 8


def tiered(tmp_path: Path, **transfer: object) -> KVContractConfig:
    """A primary of ``CAPACITY`` small blocks over one file tier under ``tmp_path``."""
    return KVContractConfig.model_validate(
        {
            "kv_layout": {
                "num_layers": 1,
                "block_tokens": 16,
                "offload_block_tokens": 16,
                "num_kv_heads": 1,
                "head_dim": 8,
                "dtype": "float16",
            },
            "manager": {
                "kind": "tiering",
                "primary": {"capacity": CAPACITY},
                "secondary": [{"kind": "file", "path": str(tmp_path / "tier"), "capacity": 16}],
            },
            "transfer": transfer,
        }
    )


@pytest.mark.parametrize(
    ("rows", "extra_bytes", "dtype"),
    [(CAPACITY - 1, 0, torch.uint8), (CAPACITY, 8, torch.uint8), (CAPACITY, 0, torch.int8)],
    ids=["too-few-rows", "rows-of-other-width", "not-bytes"],
)
def test_host_blocks_the_primary_could_run_past_are_refused(
    tmp_path: Path, rows: int, extra_bytes: int, dtype: torch.dtype
) -> None:
    config = tiered(tmp_path)
    width = config.kv_layout.offload_block_bytes + extra_bytes
    with pytest.raises(ConfigError, match=rf"host_blocks: the tiers address {CAPACITY} host blocks of"):
        build_manager(config, host_blocks=torch.zeros((rows, width), dtype=dtype))


@pytest.mark.parametrize("rows", [CAPACITY, CAPACITY + 3])
def test_host_blocks_that_hold_every_primary_block_are_used(tmp_path: Path, rows: int) -> None:
    config = tiered(tmp_path)
    host = torch.zeros((rows, config.kv_layout.offload_block_bytes), dtype=torch.uint8)
    manager = build_manager(config, host_blocks=host)
    try:
        assert manager.stats().capacity == CAPACITY
    finally:
        manager.shutdown()


def test_a_shared_memory_file_of_another_size_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "host.shm"
    path.write_bytes(b"\0" * 100)
    with pytest.raises(ConfigError, match=r"transfer\.shared_memory_path: shared memory file .* holds 100 bytes"):
        build_manager(tiered(tmp_path, shared_memory_path=str(path)))
