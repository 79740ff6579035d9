"""The check mode: read from ``KVCONTRACT_CHECKS`` on first use, held once per process."""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CHECK_MODES",
    "ENV_VAR",
    "CheckMode",
    "Settings",
    "checks_enabled",
    "checks_mode",
    "settings",
]

CheckMode = Literal["off", "on", "full"]
"""How contract calls are checked: not at all, one element per container (O(1)), every element."""

CHECK_MODES: tuple[CheckMode, ...] = ("off", "on", "full")
"""The values ``KVCONTRACT_CHECKS`` accepts."""

ENV_VAR = "KVCONTRACT_CHECKS"
"""Environment variable read once, at the first class or call that needs it: ``off``, ``on`` (default) or ``full``."""


def _mode_from_environment() -> CheckMode:
    value = os.environ.get(ENV_VAR, "on").strip().lower()
    if value in {"on", "1", "true", "yes"}:
        return "on"
    if value in {"off", "0", "false", "no"}:
        return "off"
    if value == "full":
        return "full"
    raise ValueError(
        f"{ENV_VAR}={value!r} is not understood: set it to one of "
        f"{', '.join(CHECK_MODES)} (on samples one element per container, full checks every element)"
    )


@dataclass
class Settings:
    """Whether calls are checked, whether fully, and the classes whose methods follow the two."""

    checks: bool
    full: bool
    classes: weakref.WeakSet[type]


_settings: Settings | None = None


def settings() -> Settings:
    """The settings, read from the environment the first time they are needed.

    Read on first use rather than at import, so that ``import kvcontract`` never fails and a
    command line can report a bad ``KVCONTRACT_CHECKS`` as one line (call :func:`checks_mode`).
    """
    global _settings
    if _settings is None:
        mode = _mode_from_environment()
        _settings = Settings(checks=mode != "off", full=mode == "full", classes=weakref.WeakSet())
    return _settings


def checks_enabled() -> bool:
    """Whether contract calls are checked now."""
    return settings().checks


def checks_mode() -> CheckMode:
    """The mode contract calls are checked in now; raises ``ValueError`` for a bad ``KVCONTRACT_CHECKS``."""
    state = settings()
    if not state.checks:
        return "off"
    return "full" if state.full else "on"
