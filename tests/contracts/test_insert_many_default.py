"""CachePolicy.insert_many's default body is all or nothing, as the contract says."""

from __future__ import annotations

import pytest

from kvcontract import BlockStatus, CachePolicy, make_offload_key
from kvcontract.policies import LRUPolicy


def test_the_default_insert_many_removes_what_it_inserted_when_an_insert_raises() -> None:
    keys = [make_offload_key(bytes([n])) for n in range(3)]
    policy = LRUPolicy(3)
    policy.insert(keys[2], BlockStatus(2, 0))
    with pytest.raises(ValueError):
        CachePolicy.insert_many(policy, keys, [BlockStatus(n, 0) for n in range(3)])
    assert len(policy) == 1 and policy.get(keys[0]) is None and policy.get(keys[1]) is None
