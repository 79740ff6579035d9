"""A block identity for tests of tiers: one model's layout with the block size the test's host memory has."""

from __future__ import annotations

from kvcontract.contracts.identity import BlockIdentity

__all__ = ["example_identity"]


def example_identity(
    block_bytes: int,
    *,
    model: str = "kvcontract/example",
    dtype: str = "bfloat16",
    num_layers: int = 1,
    tp_size: int = 1,
    tp_rank: int = 0,
    namespace: str = "",
) -> BlockIdentity:
    """An identity of ``block_bytes``-byte blocks; the keywords make another engine's identity
    (``dataclasses.replace`` changes any other field)."""
    return BlockIdentity(
        model=model,
        dtype=dtype,
        num_layers=num_layers,
        num_kv_heads=0,
        head_dim=0,
        block_tokens=16,
        offload_block_tokens=16,
        block_bytes=block_bytes,
        tp_size=tp_size,
        tp_rank=tp_rank,
        namespace=namespace,
    )
