"""Offload keys: a block hash followed by the 4-byte big-endian KV-cache group index."""

from __future__ import annotations

from typing import NewType

__all__ = ["OffloadKey", "make_offload_key", "offload_key_group", "offload_key_hash"]

OffloadKey = NewType("OffloadKey", bytes)
"""Identifies one offloaded block: ``block_hash + group_idx.to_bytes(4, "big")``."""

_GROUP_BYTES = 4
_MAX_GROUP = 2 ** (8 * _GROUP_BYTES) - 1


def make_offload_key(block_hash: bytes, group_idx: int = 0) -> OffloadKey:
    """Build the key of block ``block_hash`` in KV-cache group ``group_idx``."""
    if not 0 <= group_idx <= _MAX_GROUP:
        raise ValueError(f"group_idx must be in [0, {_MAX_GROUP}], got {group_idx}")
    return OffloadKey(block_hash + group_idx.to_bytes(_GROUP_BYTES, "big"))


def offload_key_hash(key: OffloadKey) -> bytes:
    """The block hash part of ``key``."""
    return key[:-_GROUP_BYTES]


def offload_key_group(key: OffloadKey) -> int:
    """The KV-cache group index part of ``key``."""
    return int.from_bytes(key[-_GROUP_BYTES:], "big")
