"""Where the shared Mooncake trace lives, relative to this checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

TRACE = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "conversation_trace.jsonl"
"""The conversation trace of the Mooncake FAST'25 release, next to the repository."""

needs_trace = pytest.mark.skipif(not TRACE.exists(), reason=f"shared trace not found at {TRACE}")
