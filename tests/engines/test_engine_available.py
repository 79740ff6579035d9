"""The one test that reports why the real-engine tests did not run (see conftest.py)."""

from __future__ import annotations

from tests.engines.support import engine_missing
from tests.required_parts import skip_unless_required


def test_vllm_engine_is_available() -> None:
    missing = engine_missing()
    if missing is not None:
        skip_unless_required("engine", f"the real-engine tests {missing}")
