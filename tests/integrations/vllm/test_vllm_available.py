"""The one test that reports why the vLLM integration tests did not run (see conftest.py)."""

from __future__ import annotations

import pytest

from tests.integrations.vllm.conftest import VLLM_MISSING
from tests.required_parts import REQUIRE_VARIABLE, required


def test_vllm_is_available() -> None:
    if VLLM_MISSING is None:
        return
    if required("vllm"):
        pytest.fail(f"{REQUIRE_VARIABLE}=vllm, but the vLLM integration tests {VLLM_MISSING}", pytrace=False)
    pytest.skip(f"vLLM integration tests {VLLM_MISSING}")
