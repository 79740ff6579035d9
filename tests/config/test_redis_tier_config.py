"""``kind: redis`` in a config: validation names the bad field; no server is needed."""

from __future__ import annotations

import pytest

from kvcontract.config import ConfigError, RedisTierConfig, load_config


def _with_tier(tier: dict[str, object]) -> dict[str, object]:
    return {"manager": {"kind": "tiering", "secondary": [{"kind": "redis", **tier}]}}


def test_a_redis_tier_needs_no_capacity() -> None:
    config = load_config(base=_with_tier({"url": "redis://127.0.0.1:6379/0", "ttl_seconds": 60}))
    manager = config.manager
    assert manager.kind == "tiering"
    tier = manager.secondary[0]
    assert isinstance(tier, RedisTierConfig) and tier.ttl_seconds == 60 and tier.namespace is None


@pytest.mark.parametrize(
    ("tier", "field", "says"),
    [
        ({}, "manager.secondary.0", "exactly one of url"),
        ({"url": "redis://a:1", "cluster_nodes": ["a:1"]}, "manager.secondary.0", "exactly one of url"),
        ({"url": "http://a:1"}, "manager.secondary.0.url", "pattern"),
        ({"cluster_nodes": ["no-port"]}, "manager.secondary.0.cluster_nodes.0", "pattern"),
        ({"url": "redis://a:1", "namespace": "{x}"}, "manager.secondary.0.namespace", "pattern"),
        ({"url": "redis://a:1", "io_threads": 8, "pool_size": 4}, "manager.secondary.0", "pool_size"),
        ({"url": "redis://a:1", "socket_timeout": 0}, "manager.secondary.0.socket_timeout", "greater than 0"),
        ({"url": "redis://a:1", "capacity": 10}, "manager.secondary.0.capacity", "unknown field; known here:"),
        ({"url": "redis://a:1", "tls": True}, "manager.secondary.0", "rediss://"),
        ({"url": "redis://a:1", "tls_ca_file": "/ca.pem"}, "manager.secondary.0", "need TLS"),
        ({"url": "rediss://a:1", "tls_cert_file": "/c.pem"}, "manager.secondary.0", "go together"),
        ({"url": "redis://a:1", "username": "has space"}, "manager.secondary.0.username", "pattern"),
    ],
)
def test_a_bad_redis_tier_names_its_field(tier: dict[str, object], field: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(base=_with_tier(tier))
    assert any(problem.startswith(field) and says in problem for problem in raised.value.problems), (
        raised.value.problems
    )
