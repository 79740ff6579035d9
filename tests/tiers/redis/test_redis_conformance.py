"""The Redis tier passes kvcontract.testing's conformance machine for secondary tiers, on a real server."""

from __future__ import annotations

import itertools

import torch

from kvcontract import OffloadKey, SecondaryTier
from kvcontract.testing import check_tier, example_identity
from kvcontract.tiers import RedisTier
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.tiers.redis.support import RedisServer


def test_the_redis_tier_conforms(redis_server: RedisServer) -> None:
    namespaces = itertools.count()

    def factory(host_blocks: torch.Tensor) -> RedisTier:
        return RedisTier(
            host_blocks,
            identity=example_identity(int(host_blocks.shape[1])),
            url=redis_server.url,
            options=RemoteTierOptions(namespace=f"conformance{next(namespaces)}", io_threads=2),
        )

    def corrupt(tier: SecondaryTier, key: OffloadKey) -> None:
        assert isinstance(tier, RedisTier)
        redis_server.command("SETRANGE", tier.redis_key(key), 60, b"\xff\x00\xff")

    check_tier(factory, corrupt=corrupt)
