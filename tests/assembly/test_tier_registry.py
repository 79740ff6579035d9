"""Tiers by registry: a config names a tier of another package by module path or entry point, checked like any other."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import torch

from kvcontract import BlockIdentity, LookupResult, ReqContext, SecondaryTier, make_offload_key
from kvcontract.assembly import build_manager, build_tier
from kvcontract.config import ConfigError, KVContractConfig, TieringManagerConfig, load_config
from kvcontract.managers import TieringOffloadingManager
from kvcontract.testing import check_tier, example_identity
from kvcontract.tiers import registry
from tests.assembly.memory_tier import MemoryTier

MEMORY_TIER = "tests.assembly.memory_tier:MemoryTier"
LAYOUT = {"num_layers": 1, "block_tokens": 16, "offload_block_tokens": 16, "num_kv_heads": 1, "head_dim": 8}


def config_with(tier: dict[str, object]) -> KVContractConfig:
    """A tiering config of a small layout whose one tier is ``tier``."""
    return KVContractConfig.model_validate(
        {
            "kv_layout": {**LAYOUT, "dtype": "float16"},
            "manager": {"kind": "tiering", "primary": {"capacity": 4}, "secondary": [tier]},
        }
    )


def built(kind: str, host: torch.Tensor, identity: BlockIdentity, **options: object) -> SecondaryTier:
    """The tier ``kind`` names, built from a config as the assembly builds every tier."""
    config = config_with({"kind": kind, "options": options})
    manager = config.manager
    assert isinstance(manager, TieringManagerConfig)
    return build_tier(manager.secondary[0], config, host, identity=identity)


def test_a_tier_named_by_module_path_is_built_with_its_options_and_passes_the_tier_rules() -> None:
    def factory(host: torch.Tensor) -> SecondaryTier:
        return built(MEMORY_TIER, host, example_identity(int(host.shape[1])), capacity=16)

    tier = factory(torch.zeros(2, 8, dtype=torch.uint8))
    assert isinstance(tier, MemoryTier) and tier._capacity == 16  # pyright: ignore[reportPrivateUsage]  # the option arrived
    check_tier(factory)


def test_a_tier_published_as_an_entry_point_is_found_by_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    published = EntryPoint("memory", MEMORY_TIER, registry.ENTRY_POINT_GROUP)

    def entry_points(group: str) -> list[EntryPoint]:
        return [published] if group == registry.ENTRY_POINT_GROUP else []

    monkeypatch.setattr(registry, "entry_points", entry_points)
    tier = built("memory", torch.zeros(2, 8, dtype=torch.uint8), example_identity(8), capacity=2)
    assert isinstance(tier, MemoryTier)


def test_a_manager_built_from_a_yaml_config_cascades_to_the_out_of_tree_tier(tmp_path: Path) -> None:
    path = tmp_path / "kvcontract.yaml"
    path.write_text(
        "kv_layout: {num_layers: 1, block_tokens: 16, offload_block_tokens: 16, num_kv_heads: 1, head_dim: 8, "
        "dtype: float16}\n"
        "manager:\n"
        "  kind: tiering\n"
        "  primary: {capacity: 4}\n"
        f'  secondary: [{{kind: "{MEMORY_TIER}", options: {{capacity: 8}}}}]\n'
    )
    config = load_config(path)
    host = torch.zeros(config.host_blocks, config.kv_layout.offload_block_bytes, dtype=torch.uint8)
    manager = build_manager(config, host_blocks=host)
    assert isinstance(manager, TieringOffloadingManager)
    (tier,) = manager.tiers
    key, request = make_offload_key(b"block"), ReqContext("r")
    output = manager.prepare_store([key], request)
    assert output is not None
    manager.complete_store([key], request)
    assert tier.lookup(key) is LookupResult.HIT
    manager.shutdown()


@pytest.mark.parametrize(
    ("tier", "field", "says"),
    [
        ({"kind": "nope"}, "secondary.0.kind", "'package.module:Class'"),
        ({"kind": "tests.assembly.absent:Tier"}, "secondary.0.kind", "does not import"),
        ({"kind": "tests.assembly.memory_tier:NotATier"}, "secondary.0.kind", "inherits"),
        ({"kind": MEMORY_TIER, "options": {"size": 3}}, "secondary.0:", "takes capacity besides"),
    ],
)
def test_a_tier_that_cannot_be_built_is_refused_when_the_config_is_loaded(
    tier: dict[str, object], field: str, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "kvcontract.json"
    path.write_text(json.dumps({"manager": {"kind": "tiering", "secondary": [tier]}}))
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert field in message and says in message


def test_options_the_tier_refuses_are_a_config_error_naming_the_tier() -> None:
    with pytest.raises(ConfigError, match="tests.assembly.memory_tier:MemoryTier.*capacity must be at least 1"):
        built(MEMORY_TIER, torch.zeros(2, 8, dtype=torch.uint8), example_identity(8), capacity=0)
