"""Fixtures of the contract and enforcement tests: a recording manager, a request context, keys."""

from __future__ import annotations

import pytest

from kvcontract import OffloadKey, ReqContext, make_offload_key
from tests.contracts.support import RecordingManager


@pytest.fixture
def manager() -> RecordingManager:
    """A fresh recording manager."""
    return RecordingManager()


@pytest.fixture
def ctx() -> ReqContext:
    """A request context."""
    return ReqContext("request-0")


@pytest.fixture
def keys() -> list[OffloadKey]:
    """Three distinct keys."""
    return [make_offload_key(bytes([i]) * 8) for i in range(3)]
