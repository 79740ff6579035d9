"""A remote tier's config gives its options, its client's (Mooncake) and its access (Redis) each as one value, every field reaching the tier under its own name."""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path

import pytest

from kvcontract.config import MooncakeTierConfig, RedisTierConfig
from kvcontract.config.tiers import RemoteTierConfig
from kvcontract.tiers.mooncake.client import MooncakeClientOptions
from kvcontract.tiers.redis.client import RedisAccess
from kvcontract.tiers.remote_tier import RemoteTierOptions

OPTIONS = RemoteTierOptions(
    namespace="scoped",
    io_threads=3,
    lookup_timeout=0.5,
    retry_interval=2.0,
    start_degraded=True,
    job_deadline=None,
    known_keys=7,
    enable_events=True,
)
"""A value other than a config's default for each option a config sets."""
SET = {name: value for name, value in asdict(OPTIONS).items() if name != "lookup_wait"}


@pytest.mark.parametrize(
    "config",
    [RedisTierConfig.model_validate({"url": "redis://a:1", **SET}), MooncakeTierConfig.model_validate(SET)],
)
def test_each_option_a_config_sets_reaches_the_tier(config: RemoteTierConfig) -> None:
    assert config.options() == OPTIONS


def test_a_config_sets_every_option_but_the_lookup_wait_of_library_callers() -> None:
    options = {option.name for option in fields(RemoteTierOptions)}
    assert options - set(RemoteTierConfig.model_fields) == {"lookup_wait"}
    assert all(getattr(RemoteTierConfig(), name) != value for name, value in SET.items())


CLIENT = MooncakeClientOptions(
    master="m.example:1",
    metadata_server="P2PHANDSHAKE",
    protocol="rdma",
    devices="mlx5_0",
    local_hostname="10.0.0.2",
    global_segment_size=0,
    local_buffer_size=1 << 20,
    replicas=2,
    timeout=0.5,
    client_log_level="ERROR",
)
"""A value other than the default for each field of Mooncake's client."""


def test_each_client_field_a_mooncake_config_sets_reaches_the_client() -> None:
    assert MooncakeTierConfig.model_validate(asdict(CLIENT)).client() == CLIENT
    assert all(value != getattr(MooncakeClientOptions(), name) for name, value in asdict(CLIENT).items())


def test_a_mooncake_config_and_its_client_agree_on_the_defaults() -> None:
    assert MooncakeTierConfig().client() == MooncakeClientOptions()


def test_each_access_field_a_redis_config_sets_reaches_the_tier(tmp_path: Path) -> None:
    files = {name: tmp_path / name for name in ("ca.pem", "cert.pem", "key.pem")}
    access = RedisAccess(
        username="reader",
        password="secret",
        tls=True,
        tls_ca_file=files["ca.pem"],
        tls_cert_file=files["cert.pem"],
        tls_key_file=files["key.pem"],
        tls_check_hostname=False,
    )
    given = {name: value for name, value in asdict(access).items() if name != "password"}
    config = RedisTierConfig.model_validate({"cluster_nodes": ["a:1"], **given})
    assert config.access("secret") == access
    assert all(value != getattr(RedisAccess(), name) for name, value in asdict(access).items())
