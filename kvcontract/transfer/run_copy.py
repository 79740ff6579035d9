"""The compiled loop that copies a job's byte runs, present when the package was built with a C compiler.

The build makes it optional (``pyproject.toml``): an install without a compiler still works,
and ``ThreadCopyEngine`` then copies with its Python loop.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

__all__ = ["CopyRuns", "compiled_copy_runs"]

CopyRuns = Callable[[memoryview, npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]], None]
"""``copy_runs(span, dst, src, sizes)``: move ``sizes[i]`` bytes from ``src[i]`` to ``dst[i]`` of ``span``."""


def _load() -> CopyRuns | None:
    try:
        from kvcontract.transfer._run_copy import copy_runs
    except ImportError:
        return None
    return copy_runs


compiled_copy_runs: CopyRuns | None = _load()
"""The compiled loop (it checks every run against the span, then copies with the GIL released), or None."""
