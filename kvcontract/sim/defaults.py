"""The configuration ``kvcontract simulate`` uses when given none: small enough for 2 CPU cores."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["SIMULATION_DEFAULTS"]

SIMULATION_DEFAULTS: Mapping[str, object] = {
    "kv_layout": {"preset": "tiny", "block_tokens": 16, "offload_block_tokens": 64},
    "manager": {"kind": "cpu", "capacity": 1024, "policy": {"kind": "lru"}},
}
"""The ``tiny`` layout (2 layers, 32 KiB offload blocks) and 32 MiB of host memory (1,024 blocks)."""
