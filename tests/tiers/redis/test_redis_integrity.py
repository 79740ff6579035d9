"""The Redis tier with an integrity key against a real server: engines with the key share, a stranger's value never loads."""

from __future__ import annotations

import pytest
import torch

from kvcontract import LookupResult, OffloadingEvent
from tests.tiers.redis.support import MakeTier, RedisServer, fill, job_counter, key, load, settle, store
from tests.tiers.support import INTEGRITY_KEY, STRANGERS, share_sealed, stranger_value


def test_engines_holding_one_key_share_blocks(make_tier: MakeTier, host: torch.Tensor) -> None:
    share_sealed(
        make_tier(namespace="sealed", integrity_key=INTEGRITY_KEY),
        make_tier(namespace="sealed", integrity_key=INTEGRITY_KEY),
        host,
    )


@pytest.mark.parametrize("stranger", STRANGERS)
def test_a_value_a_stranger_wrote_is_a_miss_an_event_and_counted(
    make_tier: MakeTier, redis_server: RedisServer, host: torch.Tensor, stranger: str
) -> None:
    """A client that knows the address, the identity and the format, but not the key, rewrites a value: it never loads."""
    tier = make_tier(integrity_key=INTEGRITY_KEY)
    jobs = job_counter()
    fill(host, [0], [1])
    assert store(tier, jobs, [key(1)], [0]).success
    tier.take_events()
    redis_server.command("SET", tier.redis_key(key(1)), stranger_value(tier, key(1), stranger))
    host[4].fill_(9)
    result = load(tier, jobs, [key(1)], [4])
    assert not result.success and result.transfer_bytes == 0
    assert not host[4].any(), "no forged byte reaches a host block"
    assert tier.take_events() == [OffloadingEvent([key(1)], "REDIS", removed=True)]
    stats = tier.stats()
    assert stats.forged_values == 1 and stats.checksum_failures == 0 and stats.rejected_values == 0
    assert settle(tier, key(1)) is LookupResult.MISS, "the forged value is deleted"


def test_a_tier_without_the_key_refuses_sealed_values(make_tier: MakeTier, host: torch.Tensor) -> None:
    sealed = make_tier(namespace="mixed", integrity_key=INTEGRITY_KEY)
    plain = make_tier(namespace="mixed")
    jobs = job_counter()
    fill(host, [0], [1])
    assert store(sealed, jobs, [key(1)], [0]).success
    assert settle(plain, key(1)) is LookupResult.HIT
    assert not load(plain, jobs, [key(1)], [3]).success
    assert plain.stats().forged_values == 1
