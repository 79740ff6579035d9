"""Finding policies by name, entry point and module path."""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib.metadata import EntryPoint

import pytest

import kvcontract.policies.registry as registry
from kvcontract.policies import (
    ARCPolicy,
    LRUPolicy,
    PrefixReusePolicy,
    S3FIFOPolicy,
    SIEVEPolicy,
    available_policies,
    get_policy,
    make_policy,
    register_policy,
)
from tests.policies.support import key, ready


def test_built_in_names() -> None:
    assert get_policy("lru") is LRUPolicy
    assert get_policy("arc") is ARCPolicy
    assert get_policy("s3fifo") is S3FIFOPolicy
    assert get_policy("sieve") is SIEVEPolicy
    assert get_policy("prefix_reuse") is PrefixReusePolicy
    assert {"lru", "arc", "s3fifo", "sieve", "prefix_reuse"} <= set(available_policies())
    assert available_policies() == sorted(available_policies())


def test_an_unknown_name_lists_the_known_ones() -> None:
    known = ", ".join(available_policies())
    with pytest.raises(ValueError, match=f"unknown policy 'lfu'; known policies: {re.escape(known)}\\."):
        get_policy("lfu")


def test_module_paths() -> None:
    assert get_policy("kvcontract.policies.lru:LRUPolicy") is LRUPolicy
    with pytest.raises(ValueError, match="cannot import 'no_such_module'"):
        get_policy("no_such_module:Policy")
    with pytest.raises(ValueError, match="has no 'Missing'"):
        get_policy("kvcontract.policies.lru:Missing")
    with pytest.raises(ValueError, match="does not inherit CachePolicy"):
        get_policy("collections:OrderedDict")
    with pytest.raises(ValueError, match="neither a CachePolicy class nor callable"):
        get_policy("kvcontract.policies.registry:ENTRY_POINT_GROUP")
    with pytest.raises(ValueError, match="must look like"):
        get_policy(":LRUPolicy")


def test_register_policy() -> None:
    register_policy("test-lru-alias", LRUPolicy)
    register_policy("test-lru-alias", LRUPolicy)
    assert get_policy("test-lru-alias") is LRUPolicy
    assert "test-lru-alias" in available_policies()
    with pytest.raises(ValueError, match="already registered"):
        register_policy("test-lru-alias", ARCPolicy)
    with pytest.raises(ValueError, match="without ':'"):
        register_policy("a:b", LRUPolicy)
    with pytest.raises(ValueError, match="non-empty"):
        register_policy(" ", LRUPolicy)


def test_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    published = [EntryPoint("third-party", "kvcontract.policies.sieve:SIEVEPolicy", registry.ENTRY_POINT_GROUP)]

    def fake_entry_points(*, group: str) -> Iterator[EntryPoint]:
        assert group == registry.ENTRY_POINT_GROUP
        return iter(published)

    monkeypatch.setattr(registry, "entry_points", fake_entry_points)
    assert get_policy("third-party") is SIEVEPolicy
    assert "third-party" in available_policies()


def test_make_policy_builds_a_name_and_takes_an_empty_instance() -> None:
    assert isinstance(make_policy("arc", 4), ARCPolicy)
    empty = LRUPolicy(4)
    assert make_policy(empty, 4) is empty


@pytest.mark.parametrize("capacity", [0, -1, True])
def test_make_policy_refuses_a_capacity_that_is_not_a_positive_int(capacity: int) -> None:
    with pytest.raises(ValueError, match="capacity must be a positive number of blocks"):
        make_policy("lru", capacity)


def test_make_policy_refuses_an_instance_holding_blocks() -> None:
    policy = LRUPolicy(4)
    policy.insert(key(1), ready())
    with pytest.raises(ValueError, match="must be empty, it holds 1 blocks"):
        make_policy(policy, 4)
