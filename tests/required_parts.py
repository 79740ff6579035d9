"""``KVCONTRACT_REQUIRE`` (CI sets it): the real parts whose absence fails a test instead of skipping it."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

REQUIRE_VARIABLE = "KVCONTRACT_REQUIRE"
"""Comma-separated parts: ``redis``, ``mooncake``, ``vllm``, ``sglang``, ``compiled`` (the CPU copy engine's compiled loop),
``engine`` (vLLM's CPU engine generating tokens, tests/engines)."""


def required(part: str) -> bool:
    """Whether this run names ``part`` as one its tests must not skip."""
    return part in {name.strip() for name in os.environ.get(REQUIRE_VARIABLE, "").split(",")}


def skip_unless_required(part: str, reason: str) -> NoReturn:
    """Skip the calling test for ``reason``, or fail it when this run names ``part`` as required."""
    if required(part):
        pytest.fail(f"{REQUIRE_VARIABLE} names {part}, but {reason}", pytrace=False)
    pytest.skip(reason)
