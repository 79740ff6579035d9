"""The Mooncake tier with an integrity key against a real master: engines with the key share, a stranger's value never loads."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
import torch

from kvcontract import LookupResult, OffloadingEvent, OffloadKey
from kvcontract.tiers.mooncake import tier as mooncake_tier
from kvcontract.tiers.mooncake.client import OBJECT_ALREADY_EXISTS
from tests.tiers.mooncake.support import MakeTier, MooncakeStore
from tests.tiers.redis.support import fill, job_counter, key, load, settle, store
from tests.tiers.support import INTEGRITY_KEY, STRANGERS, share_sealed, stranger_value

_COUNT_LIMIT_S = 10.0
"""Guard against a hang only: the background removal of a short value takes milliseconds."""


@pytest.fixture(params=["copied", "zero-copy"])
def value_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a value travels: copied through the slot, or zero copy (the threshold lowered to the tests' blocks)."""
    if request.param == "zero-copy":
        monkeypatch.setattr(mooncake_tier, "ZERO_COPY_FROM", 0)
    return str(request.param)


@pytest.mark.usefixtures("value_path")
def test_engines_holding_one_key_share_blocks(make_tier: MakeTier, host: torch.Tensor) -> None:
    share_sealed(
        make_tier(namespace="sealed", integrity_key=INTEGRITY_KEY),
        make_tier(namespace="sealed", integrity_key=INTEGRITY_KEY),
        host,
    )


@pytest.mark.usefixtures("value_path")
@pytest.mark.parametrize("stranger", STRANGERS)
def test_a_value_a_stranger_wrote_is_a_miss_an_event_and_counted(
    make_tier: MakeTier, mooncake_store: MooncakeStore, host: torch.Tensor, stranger: str
) -> None:
    """A client of the store that knows the identity and the format, but not the key, rewrites a value: it never loads."""
    tier = make_tier(integrity_key=INTEGRITY_KEY)
    jobs = job_counter()
    fill(host, [0], [1])
    assert store(tier, jobs, [key(1)], [0]).success
    tier.take_events()
    raw = mooncake_store.raw()
    try:
        assert raw.upsert(tier.store_key(key(1)), stranger_value(tier, key(1), stranger)) == 0
        host[4].fill_(9)
        result = load(tier, jobs, [key(1)], [4])
    finally:
        raw.close()
    assert not result.success and result.transfer_bytes == 0
    assert not host[4].any(), "no forged byte reaches a host block"
    assert tier.take_events() == [OffloadingEvent([key(1)], "MOONCAKE", removed=True)]
    # Zero copy, a value of an unsealed block's length fails its transfer and is sized (and counted) in the background.
    deadline = time.monotonic() + _COUNT_LIMIT_S
    while tier.stats().forged_values == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    stats = tier.stats()
    assert stats.forged_values == 1 and stats.checksum_failures == 0 and stats.rejected_values == 0


def test_a_store_answered_already_exists_does_not_vouch_for_the_value_there(
    make_tier: MakeTier, mooncake_store: MooncakeStore, host: torch.Tensor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: OBJECT_ALREADY_EXISTS counted as stored and known present, whatever the existing value.

    The client answers it for a key another client holds a put of; here the put is answered so, and
    the value there is another's."""
    tier = make_tier()
    jobs = job_counter()
    raw = mooncake_store.raw()
    try:
        assert raw.upsert(tier.store_key(key(1)), b"not a block") == 0
    finally:
        raw.close()

    def already_there(keys: Sequence[OffloadKey], host_ids: Sequence[int]) -> list[int]:
        return [OBJECT_ALREADY_EXISTS] * len(keys)

    monkeypatch.setattr(tier, "_put", already_there)
    fill(host, [0], [1])
    assert store(tier, jobs, [key(1)], [0]).success, "a value is there; the job is no failure"
    assert tier.stats().bytes_written == 0 and tier.take_events() == []
    assert tier.lookup(key(1)) is LookupResult.RETRY, "not known present: the store is asked"
    assert settle(tier, key(1)) is LookupResult.HIT
    assert not load(tier, jobs, [key(1)], [2]).success and not host[2].any(), "the value there is checked on load"
