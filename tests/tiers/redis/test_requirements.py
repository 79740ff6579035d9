"""The one place the Redis tests say why they did not run, and fail instead under ``KVCONTRACT_REQUIRE=redis``."""

from __future__ import annotations

import pytest

from tests.required_parts import REQUIRE_VARIABLE, required
from tests.tiers.redis.support import missing_reason


def test_redis_parts_are_present() -> None:
    reason = missing_reason()
    if reason is None:
        return
    if required("redis"):
        pytest.fail(f"{REQUIRE_VARIABLE} names redis but {reason}")
    pytest.skip(reason)
