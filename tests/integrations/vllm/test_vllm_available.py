"""The one test that reports why the vLLM integration tests did not run (see conftest.py)."""

from __future__ import annotations

from tests.integrations.vllm.conftest import VLLM_MISSING
from tests.required_parts import skip_unless_required


def test_vllm_is_available() -> None:
    if VLLM_MISSING is not None:
        skip_unless_required("vllm", f"the vLLM integration tests {VLLM_MISSING}")
