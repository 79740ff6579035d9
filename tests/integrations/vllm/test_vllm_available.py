"""The one test that reports why the vLLM integration tests did not run (see conftest.py)."""

from __future__ import annotations

import os

import pytest

from tests.integrations.vllm.conftest import REQUIRE_ENV, VLLM_MISSING


def test_vllm_is_available() -> None:
    if VLLM_MISSING is None:
        return
    required = {part.strip() for part in os.environ.get(REQUIRE_ENV, "").split(",")}
    if "vllm" in required:
        pytest.fail(f"{REQUIRE_ENV}=vllm, but the vLLM integration tests {VLLM_MISSING}", pytrace=False)
    pytest.skip(f"vLLM integration tests {VLLM_MISSING}")
