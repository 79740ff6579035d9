"""The Mooncake tier passes kvcontract.testing's conformance machine for secondary tiers, on a real store."""

from __future__ import annotations

import itertools

import torch

from kvcontract import OffloadKey, SecondaryTier
from kvcontract.testing import check_tier
from kvcontract.tiers import MooncakeTier
from kvcontract.tiers.store_value import encode_value
from tests.tiers.mooncake.support import MooncakeStore, tier_on


def test_the_mooncake_tier_conforms(mooncake_store: MooncakeStore) -> None:
    namespaces = itertools.count()
    raw = mooncake_store.raw()

    def factory(host_blocks: torch.Tensor) -> MooncakeTier:
        return tier_on(mooncake_store, host_blocks, namespace=f"conformance{next(namespaces)}")

    def corrupt(tier: SecondaryTier, key: OffloadKey) -> None:
        assert isinstance(tier, MooncakeTier)
        name = tier.store_key(key)
        value = bytearray(encode_value(key, tier.identity.fingerprint, memoryview(bytes(tier.identity.block_bytes))))
        value[-1] ^= 0xFF
        assert raw.upsert(name, bytes(value)) == 0

    try:
        check_tier(factory, corrupt=corrupt)
    finally:
        raw.close()
