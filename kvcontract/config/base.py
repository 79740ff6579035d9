"""The base of every config model: frozen, unknown fields refused."""

from __future__ import annotations

from typing import ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
)


class ConfigModel(BaseModel):
    """Frozen, and refuses unknown fields: a config means exactly what it says."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True)
