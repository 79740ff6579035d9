"""Soak tests: long replays that check state stays bounded; ``-m "not soak"`` leaves them out."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``soak`` marker, so ``-m soak`` and ``-m "not soak"`` select these tests."""
    config.addinivalue_line("markers", "soak: a long replay that checks state stays bounded")
