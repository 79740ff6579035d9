"""The gate of the vLLM integration tests: run against vLLM's real modules, or skip for one reason.

vLLM's cache lives in a temporary folder for the run (``VLLM_CACHE_ROOT``), so the tests pass
or fail on what is installed, never on what an earlier run left in ``~/.cache/vllm``.

Without a supported vLLM (requirements/vllm.txt) every test module here but
``test_vllm_available.py`` is left uncollected, and that one test skips with the reason, so a
plain ``pip install -e .[dev]`` passes. ``KVCONTRACT_REQUIRE=vllm`` (CI sets it) turns the
skip into a failure, so these tests can never be skipped there unnoticed.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import tempfile
from pathlib import Path

_CACHE = tempfile.mkdtemp(prefix="kvcontract-vllm-cache-")
os.environ["VLLM_CACHE_ROOT"] = _CACHE
"""A fresh vLLM cache for every run, before vLLM is imported: a warm ``~/.cache/vllm`` (its model
inspection results) hides a package missing from requirements/, as it once hid ``einops``."""
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)


def vllm_missing() -> str | None:
    """Why vLLM's real modules cannot be used here, or ``None`` when they can."""
    try:
        importlib.import_module("kvcontract.integrations.vllm")  # checks the vLLM version on import
    except ImportError as error:
        return f"need vLLM 0.34, 0.33 or 0.32 (the install commands at the top of requirements/vllm.txt): {error}"
    return None


VLLM_MISSING = vllm_missing()

collect_ignore = (
    []
    if VLLM_MISSING is None
    else [path.name for path in Path(__file__).parent.glob("test_*.py") if path.name != "test_vllm_available.py"]
)
