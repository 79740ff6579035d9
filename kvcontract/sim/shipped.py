"""The traces the package ships, by the name a command accepts in place of a path.

A shipped trace is package data (gzip-compressed JSONL, its licence in ``traces/NOTICE``),
found through :mod:`importlib.resources` so that it resolves the same from any folder,
in a wheel or an editable install.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

__all__ = ["SHIPPED_TRACES", "shipped_trace"]

SHIPPED_TRACES = {"mooncake-conversation": "mooncake_conversation.jsonl.gz"}
"""Each built-in trace's name and its file under ``kvcontract/sim/traces``."""


def shipped_trace(path: str | os.PathLike[str]) -> Path:
    """The file ``path`` names: the shipped trace of that name, unless a file of that name exists here."""
    file = SHIPPED_TRACES.get(os.fspath(path))
    if file is None or os.path.exists(path):
        return Path(path)
    return Path(str(resources.files("kvcontract.sim").joinpath("traces", file)))
