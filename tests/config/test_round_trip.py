"""What ``config show`` prints loads back as the same config and the same assembled managers:
capacities are blocks after validation, so a size is never printed as bytes read back as blocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcontract.assembly import build_manager
from kvcontract.cli import main
from kvcontract.config import LAYOUT_PRESETS, ConfigError, KVContractConfig, load_config, read_config


def size(number: int, unit: str) -> str:
    return f"{number}{unit}"


SIZES = st.builds(size, st.integers(1, 4096), st.sampled_from(["GiB", "GB"]))  # a GB holds a block of any preset
CAPACITIES = st.one_of(st.integers(1, 1 << 20), SIZES)
POLICIES = st.sampled_from(["lru", "arc", "s3fifo", "sieve", "prefix_reuse"])


@st.composite
def configs(draw: st.DrawFn) -> dict[str, object]:
    """Raw config data over every preset and every manager model, with capacities as blocks or sizes."""
    layout: dict[str, object] = {"preset": draw(st.sampled_from(sorted(LAYOUT_PRESETS)))}
    block = draw(st.sampled_from([16, 32]))
    layout |= {"block_tokens": block, "offload_block_tokens": block * draw(st.integers(1, 4))}
    primary: dict[str, object] = {"capacity": draw(CAPACITIES), "policy": draw(POLICIES)}
    if draw(st.booleans()):
        primary["admission"] = {"store_threshold": draw(st.integers(2, 4))}
    kind = draw(st.sampled_from(["cpu", "tiering"]))
    if kind == "cpu":
        return {"kv_layout": layout, "manager": {"kind": "cpu", **primary}}
    tiers: list[dict[str, object]] = [
        {"kind": "file", "path": f"/tmp/kvc-tier-{i}", "capacity": draw(CAPACITIES), "policy": draw(POLICIES)}
        for i in range(draw(st.integers(0, 2)))
    ]
    if draw(st.booleans()):
        tiers.append({"kind": "redis", "url": "redis://localhost:6379/0"})
    return {"kv_layout": layout, "manager": {"kind": "tiering", "primary": primary, "secondary": tiers}}


def shown(config_file: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["config", "show", str(config_file)]) == 0
    return capsys.readouterr().out


def primary_capacity(config: KVContractConfig) -> int:
    manager = build_manager(config.model_copy(update={"manager": _primary(config)}))
    try:
        return manager.stats().capacity
    finally:
        manager.shutdown()


def _primary(config: KVContractConfig) -> object:
    manager = config.manager
    return manager if manager.kind == "cpu" else manager.primary


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=configs())
def test_show_output_loads_back_as_the_same_config(
    data: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.yaml"
    source.write_text(json.dumps(data))  # JSON is YAML
    config = load_config(source, {})
    printed = tmp_path / "shown.yaml"
    printed.write_text(shown(source, capsys))
    again = load_config(printed, {})
    assert again == config
    assert again.model_dump() == config.model_dump()
    assert again.host_blocks == config.host_blocks
    printed.write_text(shown(printed, capsys))
    assert load_config(printed, {}) == config


def test_a_size_is_shown_as_the_blocks_it_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.yaml"
    source.write_text("kv_layout: tiny\nmanager: {kind: cpu, capacity: 1GiB}\n")
    config = load_config(source, {})
    printed = tmp_path / "shown.yaml"
    printed.write_text(shown(source, capsys))
    assert (
        yaml.safe_load(printed.read_text())["manager"]["capacity"] == (1 << 30) // config.kv_layout.offload_block_bytes
    )
    assert primary_capacity(load_config(printed, {})) == primary_capacity(config) == 32768


def test_tier_sizes_become_blocks_too() -> None:
    config = KVContractConfig.model_validate(
        {
            "kv_layout": "tiny",
            "manager": {
                "kind": "tiering",
                "primary": {"capacity": "64MiB"},
                "secondary": [{"kind": "file", "path": "/tmp/t", "capacity": "1GiB"}],
            },
        }
    )
    dumped = config.model_dump(mode="json")
    assert dumped["manager"]["primary"]["capacity"] == 2048
    assert dumped["manager"]["secondary"][0]["capacity"] == 32768
    assert type(dumped["manager"]["secondary"][0]["capacity"]) is int


def test_read_config_gives_the_sections_as_written_and_load_config_checks_them(tmp_path: Path) -> None:
    path = tmp_path / "kvc.yaml"
    path.write_text("manager:\n  capacity: 16GiB\n  policy: {kind: arc}\n")
    raw = read_config(path)
    assert raw == {"manager": {"capacity": "16GiB", "policy": {"kind": "arc"}}}  # the size as written, not blocks
    assert load_config(base=raw) == load_config(path, environ={})


def test_read_config_names_the_file_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "kvc.yaml"
    path.write_text("- a list\n")
    with pytest.raises(ConfigError, match=f"^{path}: a config is a mapping of sections"):
        read_config(path)
