"""Config bounds and hostile files: every size no machine can run, every unreadable file, is a
ConfigError naming the field or the limit, never a hang, a huge allocation or another error."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from kvcontract.config import ConfigError, ConfigLimits, KVContractConfig, check_machine, load_config


def load_text(
    tmp_path: Path, text: str | bytes, name: str = "c.yaml", environ: dict[str, str] | None = None
) -> KVContractConfig:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return load_config(path, environ or {})


def problems_of(tmp_path: Path, text: str | bytes, name: str = "c.yaml", environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_text(tmp_path, text, name, environ)
    return "; ".join(caught.value.problems)


BEYOND_LIMITS = [
    ("kv_layout: {num_layers: 1025}", "kv_layout.num_layers: Input should be less than or equal to 1024"),
    ("kv_layout: {num_kv_heads: 100000}", "kv_layout.num_kv_heads: Input should be less than or equal to 1024"),
    ("kv_layout: {head_dim: 5000}", "kv_layout.head_dim: Input should be less than or equal to 4096"),
    (
        "kv_layout: {block_tokens: 8192, offload_block_tokens: 8192}",
        "kv_layout.block_tokens: Input should be less than or equal to 4096",
    ),
    (
        "kv_layout: {offload_block_tokens: 131072}",
        "kv_layout.offload_block_tokens: Input should be less than or equal to 65536",
    ),
    ("kv_layout: {num_layers: 1024, num_kv_heads: 64, offload_block_tokens: 1024}", "more than the limit of 1.0GiB"),
    (
        "kv_layout: {block_tokens: 1, offload_block_tokens: 1, num_kv_heads: 1, head_dim: 3, dtype: int8}",
        "whole 8-byte words",
    ),
    ("manager: {capacity: 2PiB}", "more than the limit of 256.0TiB of any capacity"),
    ("manager: {capacity: 4294967297}", "more than the limit of 4294967296 blocks"),
    (
        "manager: {capacity: 100TiB}",
        "manager.capacity: 13107200 blocks of 8.0MiB are 100.0TiB, more than the limit of 64.0TiB for host memory",
    ),
    ("manager: {capacity: 1000000000000000000000000000000}", "more than the limit of 4294967296 blocks"),
    (
        "manager: {admission: {max_tracker_size: 1000000000}}",
        "manager.admission.max_tracker_size: Input should be less than or equal to 10000000",
    ),
    (
        "manager: {kind: tiering, secondary: [{kind: file, path: /tmp/x, capacity: 1TiB, io_threads: 10000}]}",
        "manager.secondary.0.io_threads: Input should be less than or equal to 64",
    ),
    (
        "manager: {kind: tiering, secondary: [{kind: file, path: /tmp/x, capacity: 300TiB}]}",
        "manager.secondary.0.capacity",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BEYOND_LIMITS)
def test_sizes_beyond_any_machine_are_refused_naming_the_limit(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in problems_of(tmp_path, text)


def test_huge_integers_are_named_by_their_size_not_printed(tmp_path: Path) -> None:
    assert "an integer has more than 4300 digits" in problems_of(
        tmp_path, "kv_layout: {num_layers: " + "9" * 5000 + "}"
    )
    assert "an integer has more than 4300 digits" in problems_of(
        tmp_path, '{"manager": {"capacity": ' + "9" * 5000 + "}}", "c.json"
    )
    shown = problems_of(tmp_path, "kv_layout: {num_layers: " + "9" * 4000 + "}")
    assert "(got an integer of" in shown and len(shown) < 200


@pytest.mark.parametrize("name", ["c.yaml", "c.json", "c.toml"])
def test_deep_nesting_is_refused(tmp_path: Path, name: str) -> None:
    if name == "c.toml":
        text = "x = " + "[" * 50_000 + "]" * 50_000
    elif name == "c.json":
        text = '{"x": ' + "[" * 50_000 + "]" * 50_000 + "}"
    else:
        text = "x: " + "[" * 50_000 + "]" * 50_000
    assert "nest" in problems_of(tmp_path, text, name)
    assert "a config nests at most 16 levels" in problems_of(tmp_path, "x: " + "[" * 20 + "]" * 20)


def test_alias_bombs_and_cycles_stop_at_the_value_limit(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    assert f"at most {ConfigLimits.MAX_CONFIG_VALUES} values" in problems_of(tmp_path, "\n".join(lines))
    assert "nests at most" in problems_of(tmp_path, "a: &a [*a]")


def test_big_files_are_refused_unread(tmp_path: Path) -> None:
    assert "at most 1048576 bytes" in problems_of(tmp_path, "#" * (2 << 20))


@pytest.mark.parametrize("codec", ["utf-8-sig", "utf-16", "utf-32"])
def test_unicode_files_with_a_byte_order_mark_load(tmp_path: Path, codec: str) -> None:
    config = load_text(tmp_path, "manager: {capacity: 12}\n".encode(codec))
    assert config.host_blocks == 12


def test_undecodable_files_name_the_byte(tmp_path: Path) -> None:
    assert "not UTF-8 text: byte 0xe9 at offset 20" in problems_of(tmp_path, b"manager: {capacity: \xe9}")
    assert "not UTF-16 text" in problems_of(tmp_path, codecs.BOM_UTF16_LE + b"x: 1\n")


@pytest.mark.parametrize("raw", ["[unclosed", "{a: b", "9" * 5000, "'", "*alias"])
def test_environment_overrides_that_are_not_yaml_name_the_variable(tmp_path: Path, raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, {"KVCONTRACT_MANAGER__CAPACITY": raw})
    assert caught.value.source == "KVCONTRACT_MANAGER__CAPACITY"
    assert caught.value.problems[0].startswith("not a YAML value")


def test_deep_environment_overrides_are_refused() -> None:
    with pytest.raises(ConfigError, match="nests at most"):
        load_config(None, {"KVCONTRACT_MANAGER__X": "[" * 40 + "]" * 40})


def test_policy_paths_must_name_a_cache_policy_factory_by_type(tmp_path: Path) -> None:
    module = tmp_path / "kvc_plugin_policies.py"
    module.write_text(
        "from kvcontract.contracts import CachePolicy\n"
        "from kvcontract.policies.lru import LRUPolicy\n"
        "def made(capacity: int) -> LRUPolicy:\n    return LRUPolicy(capacity)\n"
        "def loose(capacity):\n    return LRUPolicy(capacity)\n"
        "class NotAPolicy:\n    pass\n"
    )
    (tmp_path / "kvc_plugin_broken.py").write_text("raise RuntimeError('plugin exploded')\n")
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        made = load_config(None, {}, base={"manager": {"capacity": 4, "policy": "kvc_plugin_policies:made"}})
        assert made.host_blocks == 4
        load_config(None, {}, base={"manager": {"capacity": 4, "policy": "kvcontract.policies.arc:ARCPolicy"}})
        for path, expected in [
            ("kvc_plugin_policies:loose", "neither a CachePolicy class nor a function annotated"),
            ("kvc_plugin_policies:NotAPolicy", "does not inherit CachePolicy"),
            ("os:system", "neither a CachePolicy class"),
            ("kvc_plugin_broken:Policy", "importing it raised RuntimeError: plugin exploded"),
        ]:
            with pytest.raises(ConfigError) as caught:
                load_config(None, {}, base={"manager": {"capacity": 4, "policy": path}})
            assert "manager.policy.kind" in caught.value.problems[0] and expected in caught.value.problems[0]
    finally:
        sys.path.remove(str(tmp_path))


def test_the_machine_check_names_a_missing_device_and_memory_beyond_this_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import kvcontract.config.machine as config_module

    config = KVContractConfig.model_validate(
        {"kv_layout": "tiny", "manager": {"capacity": "1GiB"}, "transfer": {"device": "cuda:63"}}
    )
    monkeypatch.setattr(config_module, "physical_memory_bytes", lambda: 512 << 20)
    with pytest.raises(ConfigError) as caught:
        check_machine(config, "c.yaml")
    assert caught.value.source == "c.yaml"
    device, memory = caught.value.problems
    assert device.startswith("transfer.device: cuda:63 does not exist on this machine")
    assert memory == "manager.capacity: 1.0GiB of host memory is more than this machine's 512.0MiB of physical memory"
    check_machine(KVContractConfig.model_validate({"kv_layout": "tiny", "manager": {"capacity": 8}}))


def test_the_machine_check_needs_a_shared_memory_file_of_the_buffer_size(tmp_path: Path) -> None:
    shared = tmp_path / "host.buf"

    def config(path: Path) -> KVContractConfig:
        data = {"kv_layout": "tiny", "manager": {"capacity": 4}, "transfer": {"shared_memory_path": str(path)}}
        return KVContractConfig.model_validate(data)

    check_machine(config(shared))  # absent: created at the right size
    block = config(shared).kv_layout.offload_block_bytes
    shared.write_bytes(bytes(4 * block))
    check_machine(config(shared))
    shared.write_bytes(bytes(3 * block))
    with pytest.raises(ConfigError, match=f"holds {3 * block} bytes, this config's host buffer needs {4 * block}"):
        check_machine(config(shared))
    with pytest.raises(ConfigError, match="is not a regular file"):
        check_machine(config(tmp_path))
    with pytest.raises(ConfigError, match="is not a directory"):
        check_machine(config(tmp_path / "missing" / "host.buf"))


def test_other_tools_kvcontract_variables_are_not_overrides() -> None:
    environ = {"KVCONTRACT_HYPOTHESIS_PROFILE": "thorough", "KVCONTRACT_REQUIRE": "redis", "KVCONTRACT_CHECKS": "off"}
    assert load_config(None, environ, base={"manager": {"capacity": 3}}).host_blocks == 3
    assert not load_config(None, {"KVCONTRACT_RUNTIME_CHECKS": "false"}).runtime_checks
    with pytest.raises(
        ConfigError, match=r"managr \(from KVCONTRACT_MANAGR__CAPACITY\): unknown field; did you mean manager\?"
    ):
        load_config(None, {"KVCONTRACT_MANAGR__CAPACITY": "3"})
