"""The offload keys of block hash ids: one key builder for every trace, replay and benchmark.

A hash id is a trace's (or a workload's) name for one block; its key is the id's 8-byte
big-endian form in KV-cache group 0, and equal ids share one key object, as an engine shares
its block hashes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kvcontract.contracts import OffloadKey, make_offload_key

__all__ = ["HASH_ID_BYTES", "block_key", "key_chains"]

HASH_ID_BYTES = 8
"""Bytes of a hash id in its key: ids are below ``2 ** 64``."""


def block_key(hash_id: int) -> OffloadKey:
    """The offload key of block ``hash_id``: its 8-byte big-endian form, KV-cache group 0."""
    return make_offload_key(hash_id.to_bytes(HASH_ID_BYTES, "big"))


def key_chains(requests: Iterable[Sequence[int]]) -> list[list[OffloadKey]]:
    """Each request's keys from its block hash ids, one key object per distinct id, as an engine shares hashes."""
    keys: dict[int, OffloadKey] = {}
    chains: list[list[OffloadKey]] = []
    for hash_ids in requests:
        chain: list[OffloadKey] = []
        for hash_id in hash_ids:
            key = keys.get(hash_id)
            if key is None:
                key = keys[hash_id] = block_key(hash_id)
            chain.append(key)
        chains.append(chain)
    return chains
