"""The gate of the SGLang integration tests: run against SGLang's real modules, or skip for one reason.

Without a supported SGLang (requirements/sglang.txt) every test module here but
``test_sglang_available.py`` is left uncollected, and that one test skips with the reason;
``KVCONTRACT_REQUIRE=sglang`` (CI sets it) turns the skip into a failure.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest


def sglang_missing() -> str | None:
    """Why SGLang's real modules cannot be used here, or ``None`` when they can."""
    try:
        # The helpers put the CPU stand-ins in place, then import the backend (which checks the
        # SGLang version on import) and SGLang's modules the tests use (backend factory, host pools).
        importlib.import_module("tests.integrations.sglang.support")
    except ImportError as error:
        return f"need SGLang 0.5.23 (the install commands at the top of requirements/sglang.txt): {error}"
    return None


SGLANG_MISSING = sglang_missing()

collect_ignore = (
    []
    if SGLANG_MISSING is None
    else [path.name for path in Path(__file__).parent.glob("test_*.py") if path.name != "test_sglang_available.py"]
)


@pytest.fixture(scope="module")
def gloo_rank(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A one-rank gloo group and SGLang's parallel context for a single rank, for the modules that run SGLang's controllers."""
    from tests.integrations.sglang.support import one_gloo_rank

    with one_gloo_rank(tmp_path_factory.mktemp("gloo") / "rendezvous"):
        yield
