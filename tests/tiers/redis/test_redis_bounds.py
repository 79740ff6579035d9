"""What a Redis tier keeps is bounded: no events unless asked for, at most ``known_keys`` keys remembered."""

from __future__ import annotations

import torch

from kvcontract import LookupResult
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.tiers.redis.support import MakeTier, job_counter, key, settle, store


def test_a_tier_without_events_keeps_none(make_tier: MakeTier, host: torch.Tensor) -> None:
    """Regression: a tier whose events nobody took held one per stored block (12,000 pages, 7 MB under SGLang)."""
    tier = make_tier(options=RemoteTierOptions())
    jobs = job_counter()
    for i in range(20):
        assert store(tier, jobs, [key(i)], [i % 4]).success
    assert tier.take_events() == []


def test_a_tier_remembers_at_most_known_keys(make_tier: MakeTier, host: torch.Tensor) -> None:
    tier = make_tier(options=RemoteTierOptions(known_keys=4))
    jobs = job_counter()
    for i in range(10):
        assert store(tier, jobs, [key(i)], [0]).success
    assert [tier.lookup(key(i)) for i in range(6, 10)] == [LookupResult.HIT] * 4
    assert tier.lookup(key(0)) is LookupResult.RETRY, "a forgotten key is asked again"
    assert settle(tier, key(0)) is LookupResult.HIT, "and found present"
