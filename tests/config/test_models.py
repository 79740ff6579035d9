"""Config models: defaults, presets, sizes, cross-field rules, files, environment, schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from kvcontract.config import (
    ConfigError,
    CPUManagerConfig,
    FileTierConfig,
    KVContractConfig,
    KVLayout,
    TieringManagerConfig,
    config_json_schema,
    load_config,
    parse_size,
)


def test_defaults_are_valid_and_round_trip() -> None:
    config = KVContractConfig()
    assert config.kv_layout.blocks_per_offload_block == 4
    assert config.kv_layout.offload_block_bytes == 4 * 2 * 32 * 16 * 8 * 128 * 2
    assert KVContractConfig.model_validate(config.model_dump(mode="json")) == config


def test_presets_by_name_and_with_overrides() -> None:
    assert KVLayout.model_validate("llama-3.1-70b").num_layers == 80
    layout = KVLayout.model_validate({"preset": "qwen2.5-7b", "block_tokens": 32, "offload_block_tokens": 256})
    assert (layout.num_layers, layout.num_kv_heads, layout.blocks_per_offload_block) == (28, 4, 8)


def test_capacity_as_size_becomes_blocks() -> None:
    config = KVContractConfig.model_validate({"kv_layout": "tiny", "manager": {"kind": "cpu", "capacity": "64MiB"}})
    block = config.kv_layout.offload_block_bytes
    assert config.host_blocks == 64 * 2**20 // block
    assert KVContractConfig.model_validate({"manager": {"capacity": 10}}).host_blocks == 10


SIZES = [("64MiB", 64 * 2**20), ("1.5 GiB", 3 * 2**29), ("2gb", 2 * 10**9), (" 8 TB ", 8 * 10**12), ("4096B", 4096)]


@pytest.mark.parametrize(("text", "size"), SIZES)
def test_sizes_take_a_number_and_a_unit(text: str, size: int) -> None:
    assert parse_size(text) == size


MEANINGLESS = ["4000000%", "64MiB!!", "50%", "4096", "16 GiBs", "1e9B", "-1GiB", "GiB", "", "0x10MiB", "16 bits"]


@pytest.mark.parametrize("text", MEANINGLESS)
def test_a_capacity_that_is_no_size_is_one_error_naming_the_field_and_the_forms(tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kv_layout": "tiny", "manager": {"capacity": text}}))
    with pytest.raises(ConfigError) as raised:
        load_config(path, environ={})
    problems = raised.value.problems
    assert len(problems) == 1, problems
    assert problems[0].startswith("manager.capacity: "), problems
    assert "KiB, MiB, GiB, TiB" in problems[0] and "integer" in problems[0], problems
    with pytest.raises(ValueError, match="KiB, MiB, GiB"):
        parse_size(text)


def test_a_percentage_in_a_config_says_where_percentages_belong() -> None:
    with pytest.raises(ValidationError, match="percentages of a trace's blocks are for kvcontract plan"):
        KVContractConfig.model_validate({"manager": {"capacity": "50%"}})


def test_models_are_frozen() -> None:
    config = KVContractConfig()
    with pytest.raises(ValidationError, match="frozen"):
        setattr(config, "runtime_checks", False)


INVALID: list[tuple[dict[str, object], str]] = [
    (
        {"kv_layout": {"block_tokens": 16, "offload_block_tokens": 40}},
        "offload_block_tokens (40) must be a multiple of block_tokens (16)",
    ),
    ({"kv_layout": {"num_layers": 0}}, "kv_layout.num_layers: Input should be greater than or equal to 1"),
    ({"kv_layout": {"dtype": "float64"}}, "kv_layout.dtype: Input should be 'float32'"),
    ({"kv_layout": "gpt-5"}, "unknown layout preset 'gpt-5'; known: llama-3.1-8b"),
    ({"manager": {"kind": "cpu", "capacity": 0}}, "manager.capacity: capacity 0 is below one block"),
    (
        {"manager": {"kind": "cpu", "capacity": "1KiB"}},
        "manager.capacity: 1.0KiB holds no offload block of 8.0MiB; give at least one block",
    ),
    ({"manager": {"kind": "cpu", "capacity": "lots"}}, "manager.capacity"),
    (
        {"manager": {"kind": "disk"}},
        "manager: Input tag 'disk' found using 'kind' does not match any of the expected tags: 'cpu', 'tiering'",
    ),
    ({"manager": {"kind": "cpu", "policy": "mru"}}, "manager.policy.kind: unknown policy 'mru'"),
    (
        {"manager": {"kind": "cpu", "admission": {"store_threshold": 1}}},
        "manager.admission.store_threshold: Input should be greater than or equal to 2",
    ),
    (
        {"manager": {"kind": "cpu", "capacity_blocks": 5}},
        "manager.capacity_blocks: unknown field; did you mean capacity?",
    ),
    ({"transfer": {"device": "tpu"}}, "transfer.device: String should match pattern"),
    ({"transfer": {"pinned": "sometimes"}}, "transfer.pinned"),
    ({"runtime_checks": "perhaps"}, "runtime_checks: Input should be a valid boolean"),
    (
        {"manager": {"kind": "tiering", "secondary": [{"kind": "file", "capacity": 10}]}},
        "manager.secondary.0.path: Field required",
    ),
    ({"manager": {"kind": "tiering", "primary": {"kind": "cpu", "capacity": -3}}}, "manager.primary.capacity"),
    ({"extra_section": {}}, "extra_section: unknown field; known here: identity, kv_layout, manager,"),
]


@pytest.mark.parametrize(("data", "expected"), INVALID)
def test_each_invalid_config_names_its_field(tmp_path: Path, data: dict[str, object], expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as raised:
        load_config(path, environ={})
    assert raised.value.source == str(path)
    assert any(expected in problem for problem in raised.value.problems), raised.value.problems


def test_every_error_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "two.json"
    path.write_text(json.dumps({"kv_layout": {"num_layers": 0, "head_dim": 0}}))
    with pytest.raises(ConfigError) as raised:
        load_config(path, environ={})
    assert len(raised.value.problems) == 2


YAML = """
kv_layout: {preset: tiny}
manager:
  kind: cpu
  capacity: 300
  policy: {kind: lru}
  admission: {kind: reuse, store_threshold: 3}
runtime_checks: false
"""
TOML = """
runtime_checks = false
[kv_layout]
preset = "tiny"
[manager]
kind = "cpu"
capacity = 300
policy = "lru"
[manager.admission]
kind = "reuse"
store_threshold = 3
"""


@pytest.mark.parametrize(("name", "text"), [("c.yaml", YAML), ("c.toml", TOML)])
def test_yaml_and_toml_files(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    config = load_config(path, environ={})
    assert isinstance(config.manager, CPUManagerConfig)
    assert config.manager.capacity == 300
    assert config.manager.admission is not None and config.manager.admission.store_threshold == 3
    assert not config.runtime_checks


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("c.ini", "", "unknown config format '.ini'; use .yaml, .toml or .json"),
        ("c.yaml", "manager: [unclosed", "not valid YAML"),
        ("c.json", "{", "not valid JSON"),
        ("c.toml", "a = ", "not valid TOML"),
        ("c.yaml", "- 1\n- 2\n", "a config is a mapping of sections, got list"),
    ],
)
def test_unreadable_files(tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=expected.replace(".", r"\.").replace("(", r"\(")):
        load_config(path, environ={})


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config: No such file or directory"):
        load_config(tmp_path / "absent.yaml", environ={})


def test_environment_overrides_fields(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(YAML)
    environ = {
        "KVCONTRACT_MANAGER__CAPACITY": "512",
        "KVCONTRACT_RUNTIME_CHECKS": "true",
        "KVCONTRACT_TRANSFER__DEVICE": "cpu",
        "KVCONTRACT_CHECKS": "off",
        "UNRELATED": "x",
    }
    config = load_config(path, environ=environ)
    assert isinstance(config.manager, CPUManagerConfig)
    assert config.manager.capacity == 512
    assert config.runtime_checks
    assert config.transfer.device == "cpu"


def test_environment_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match="manager.capacity"):
        load_config(environ={"KVCONTRACT_MANAGER__CAPACITY": "many"})


def test_tiering_config() -> None:
    config = KVContractConfig.model_validate(
        {
            "kv_layout": "tiny",
            "manager": {
                "kind": "tiering",
                "primary": {"kind": "cpu", "capacity": 16},
                "secondary": [{"kind": "file", "path": "/tmp/x", "capacity": "1MiB"}],
            },
        }
    )
    assert isinstance(config.manager, TieringManagerConfig)
    assert config.host_blocks == 16
    tier = config.manager.secondary[0]
    assert isinstance(tier, FileTierConfig)
    assert tier.capacity == 2**20 // config.kv_layout.offload_block_bytes


def test_schema_names_every_kind() -> None:
    schema = json.dumps(config_json_schema())
    for kind in ("cpu", "tiering", "file", "reuse"):
        assert f'"{kind}"' in schema
    assert '"kv_layout"' in schema


@pytest.mark.parametrize(
    ("identity", "message"),
    [
        ({"tp_size": 2, "tp_rank": 2}, "identity.tp_rank: tp_rank (2) must be below tp_size (2)"),
        ({"pp_rank": 1}, "identity.pp_rank: pp_rank (1) must be below pp_size (1)"),
        ({"cp_size": 0}, "identity.cp_size"),
        ({"model": "m" * 300}, "identity.model"),
        ({"colour": "red"}, "identity.colour"),
    ],
)
def test_a_bad_identity_names_its_field(identity: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(base={"identity": identity})
    assert message in str(raised.value)


def test_the_block_identity_joins_the_layout_and_the_identity_section() -> None:
    config = load_config(base={"kv_layout": "tiny", "identity": {"model": "org/tiny", "namespace": "a"}})
    identity = config.block_identity()
    assert (identity.model, identity.dtype, identity.num_layers, identity.namespace) == ("org/tiny", "float16", 2, "a")
    assert identity.block_bytes == config.kv_layout.offload_block_bytes
