"""Engines of many identities on one real Redis: side by side, none ever reads another's values."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis.stateful import run_state_machine_as_test
from typing_extensions import override

from kvcontract import BlockIdentity, SecondaryTier
from kvcontract.assembly import build_tier
from kvcontract.config import RedisTierConfig
from kvcontract.tiers import RedisTier
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.profiles import stateful_settings
from tests.tiers.redis.support import RedisServer
from tests.tiers.support import SharedTierMachine, engines_keep_their_own
from tests.tiers.test_identity_sharing import ENGINES, KEYS, engine_config

_namespaces = itertools.count()


def engine_tier(name: str, server: RedisServer, namespace: str) -> tuple[RedisTier, torch.Tensor]:
    """The Redis tier an engine of config ``name`` builds (keys scoped by ``namespace``), and its host memory."""
    config = engine_config(name)
    host = torch.zeros((KEYS, config.kv_layout.offload_block_bytes), dtype=torch.uint8)
    tier = build_tier(RedisTierConfig(url=server.url, namespace=namespace, lookup_timeout=10.0), config, host)
    assert isinstance(tier, RedisTier)
    return tier, host


@pytest.mark.parametrize("second", sorted(set(ENGINES) - {"bfloat16"}))
def test_a_second_engine_gets_no_hit_from_the_first_and_each_restart_reuses_its_own(
    redis_server: RedisServer, second: str
) -> None:
    namespace = f"identity{next(_namespaces)}"
    engines_keep_their_own(lambda name: engine_tier(name, redis_server, namespace), "bfloat16", second)


def test_no_load_ever_returns_a_value_of_another_identity(redis_server: RedisServer) -> None:
    class RedisMachine(SharedTierMachine):
        @override
        def make_tier(self, identity: BlockIdentity, host: torch.Tensor) -> SecondaryTier:
            return RedisTier(
                host,
                identity=identity,
                url=redis_server.url,
                options=RemoteTierOptions(lookup_timeout=10.0, io_threads=1),
            )

    run_state_machine_as_test(RedisMachine, settings=stateful_settings(steps=30, fast_examples=10))
