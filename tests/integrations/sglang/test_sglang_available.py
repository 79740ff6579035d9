"""The one test that reports why the SGLang integration tests did not run (see conftest.py)."""

from __future__ import annotations

from tests.integrations.sglang.conftest import SGLANG_MISSING
from tests.required_parts import skip_unless_required


def test_sglang_is_available() -> None:
    if SGLANG_MISSING is not None:
        skip_unless_required("sglang", f"the SGLang integration tests {SGLANG_MISSING}")
