"""The gate of the vLLM integration tests: run against vLLM's real modules, or skip for one reason.

Without a supported vLLM (requirements/vllm.txt) every test module here but
``test_vllm_available.py`` is left uncollected, and that one test skips with the reason, so a
plain ``pip install -e .[dev]`` passes. ``KVCONTRACT_REQUIRE=vllm`` (CI sets it) turns the
skip into a failure, so these tests can never be skipped there unnoticed.
"""

from __future__ import annotations

import importlib
from pathlib import Path


def vllm_missing() -> str | None:
    """Why vLLM's real modules cannot be used here, or ``None`` when they can."""
    try:
        importlib.import_module("kvcontract.integrations.vllm")  # checks the vLLM version on import
    except ImportError as error:
        return f"needs vLLM 0.34 or 0.33 (requirements/vllm.txt): {error}"
    return None


VLLM_MISSING = vllm_missing()

collect_ignore = (
    []
    if VLLM_MISSING is None
    else [path.name for path in Path(__file__).parent.glob("test_*.py") if path.name != "test_vllm_available.py"]
)
