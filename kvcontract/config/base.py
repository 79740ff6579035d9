"""The base of every config model: frozen, unknown fields refused."""

from __future__ import annotations

import sys
from typing import ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
)

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on Python 3.10 only
    pass


class ConfigModel(BaseModel):
    """Frozen, and refuses unknown fields: a config means exactly what it says."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True)
