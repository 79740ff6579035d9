"""Engines of many identities on one real Mooncake Store: side by side, none ever reads another's values."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from typing_extensions import override

from kvcontract import BlockIdentity, SecondaryTier
from kvcontract.assembly import build_tier
from kvcontract.config import MooncakeTierConfig
from kvcontract.tiers import MooncakeTier
from tests.tiers.mooncake.support import MooncakeStore, tier_on
from tests.tiers.support import SharedTierMachine, engines_keep_their_own
from tests.tiers.test_identity_sharing import ENGINES, KEYS, engine_config

_namespaces = itertools.count()


def engine_tier(name: str, store: MooncakeStore, namespace: str) -> tuple[MooncakeTier, torch.Tensor]:
    """The Mooncake tier an engine of config ``name`` builds (keys scoped by ``namespace``), and its host memory."""
    config = engine_config(name)
    host = torch.zeros((KEYS, config.kv_layout.offload_block_bytes), dtype=torch.uint8)
    tier_config = MooncakeTierConfig.model_validate(
        {**store.tier_config(), "namespace": namespace, "lookup_timeout": 10.0}
    )
    tier = build_tier(tier_config, config, host)
    assert isinstance(tier, MooncakeTier)
    return tier, host


@pytest.mark.parametrize("second", sorted(set(ENGINES) - {"bfloat16"}))
def test_a_second_engine_gets_no_hit_from_the_first_and_each_restart_reuses_its_own(
    mooncake_store: MooncakeStore, second: str
) -> None:
    namespace = f"identity{next(_namespaces)}"
    engines_keep_their_own(lambda name: engine_tier(name, mooncake_store, namespace), "bfloat16", second)


def test_no_load_ever_returns_a_value_of_another_identity(mooncake_store: MooncakeStore) -> None:
    class MooncakeMachine(SharedTierMachine):
        @override
        def make_tier(self, identity: BlockIdentity, host: torch.Tensor) -> SecondaryTier:
            return tier_on(mooncake_store, host, identity=identity, io_threads=1)

    # Five examples in every profile: each builds three Mooncake clients (seconds apiece), and the same
    # machine runs thorough on the file and Redis tiers, whose identity handling this one shares.
    run_state_machine_as_test(
        MooncakeMachine,
        settings=settings(
            stateful_step_count=30, max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow]
        ),
    )
