"""Keys and blocks for the policy and manager tests."""

from __future__ import annotations

from kvcontract import BlockStatus, OffloadKey, make_offload_key
from kvcontract.policies import available_policies

POLICY_NAMES = ("lru", "arc", "s3fifo", "sieve", "prefix_reuse")
"""The built-in policies; every one of them must pass the shared tests."""

assert set(POLICY_NAMES) <= set(available_policies())


def key(number: int) -> OffloadKey:
    """The offload key of block ``number``, as the trace replay builds it."""
    return make_offload_key(number.to_bytes(8, "big"))


def keys(*numbers: int) -> list[OffloadKey]:
    """The keys of ``numbers``, in order."""
    return [key(number) for number in numbers]


def ready(block_id: int = 0) -> BlockStatus:
    """A readable, evictable block."""
    return BlockStatus(block_id, ref_cnt=0)
