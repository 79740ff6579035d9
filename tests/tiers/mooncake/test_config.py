"""``kind: mooncake`` in a config: validation names the bad field, and the client stays optional; no store is needed."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import types

import pytest
import torch

from kvcontract.assembly import build_tier
from kvcontract.config import ConfigError, MooncakeTierConfig, TieringManagerConfig, load_config
from kvcontract.tiers.mooncake.client import MISSING_EXTRA


def _with_tier(tier: dict[str, object]) -> dict[str, object]:
    return {"kv_layout": "tiny", "manager": {"kind": "tiering", "secondary": [{"kind": "mooncake", **tier}]}}


def test_the_issue_s_keys_configure_a_mooncake_tier() -> None:
    config = load_config(
        base=_with_tier(
            {
                "master": "127.0.0.1:50051",
                "metadata_server": "http://127.0.0.1:8080/metadata",
                "protocol": "tcp",
                "devices": "",
                "global_segment_size": "1GiB",
                "local_buffer_size": "256MiB",
                "replicas": 1,
                "timeout": 5,
                "io_threads": 4,
                "namespace": "team-a",
            }
        )
    )
    assert isinstance(config.manager, TieringManagerConfig)
    tier = config.manager.secondary[0]
    assert isinstance(tier, MooncakeTierConfig)
    assert (tier.global_segment_size, tier.local_buffer_size, tier.namespace) == (1 << 30, 256 << 20, "team-a")


@pytest.mark.parametrize(
    ("tier", "field", "says"),
    [
        ({"master": "no-port"}, "manager.secondary.0.master", "pattern"),
        ({"metadata_server": "etcd://x"}, "manager.secondary.0.metadata_server", "pattern"),
        ({"protocol": "udp"}, "manager.secondary.0.protocol", "'tcp' or 'rdma'"),
        ({"global_segment_size": "lots"}, "manager.secondary.0.global_segment_size", "could not parse"),
        ({"replicas": 0}, "manager.secondary.0.replicas", "greater than or equal to 1"),
        ({"timeout": 0}, "manager.secondary.0.timeout", "greater than 0"),
        ({"namespace": "a:b"}, "manager.secondary.0.namespace", "pattern"),
        ({"capacity": 10}, "manager.secondary.0.capacity", "unknown field; known here:"),
        ({"client_log_level": "DEBUG"}, "manager.secondary.0.client_log_level", "'INFO', 'WARNING' or 'ERROR'"),
    ],
)
def test_a_bad_mooncake_tier_names_its_field(tier: dict[str, object], field: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(base=_with_tier(tier))
    assert any(problem.startswith(field) and says in problem for problem in raised.value.problems), (
        raised.value.problems
    )


def test_without_the_client_building_the_tier_is_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_mooncake(name: str, package: str | None = None) -> types.ModuleType:
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(importlib, "import_module", no_mooncake)
    config = load_config(base=_with_tier({}))
    manager = config.manager
    assert isinstance(manager, TieringManagerConfig)
    host = torch.zeros((1, config.kv_layout.offload_block_bytes), dtype=torch.uint8)
    with pytest.raises(ImportError) as raised:
        build_tier(manager.secondary[0], config, host)
    assert str(raised.value) == MISSING_EXTRA and "kvcontract[mooncake]" in MISSING_EXTRA


@pytest.mark.parametrize(("given", "level"), [(None, "ERROR"), ("INFO", "INFO")])
def test_the_client_s_log_level_is_set_before_its_library_loads_unless_the_operator_set_it(
    given: str | None, level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str | None] = []

    def record_then_fail(name: str, package: str | None = None) -> types.ModuleType:
        seen.append(os.environ.get("MC_LOG_LEVEL"))
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setenv("MC_LOG_LEVEL", given or "")  # recorded, so the value connect() sets goes with the test
    if given is None:
        monkeypatch.delenv("MC_LOG_LEVEL")
    monkeypatch.setattr(importlib, "import_module", record_then_fail)
    config = load_config(base=_with_tier({"client_log_level": "ERROR"}))
    manager = config.manager
    assert isinstance(manager, TieringManagerConfig)
    host = torch.zeros((1, config.kv_layout.offload_block_bytes), dtype=torch.uint8)
    with pytest.raises(ImportError):
        build_tier(manager.secondary[0], config, host)
    assert seen == [level]


def test_import_kvcontract_imports_no_mooncake() -> None:
    code = "import sys, kvcontract, kvcontract.tiers, kvcontract.assembly; print('mooncake' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )
