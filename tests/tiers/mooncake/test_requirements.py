"""The one place the Mooncake tests say why they did not run, and fail instead under ``KVCONTRACT_REQUIRE=mooncake``."""

from __future__ import annotations

from tests.required_parts import skip_unless_required
from tests.tiers.mooncake.support import missing_reason


def test_mooncake_parts_are_present() -> None:
    reason = missing_reason()
    if reason is not None:
        skip_unless_required("mooncake", reason)
