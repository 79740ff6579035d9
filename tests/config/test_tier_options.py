"""A remote tier's config gives its options as one value, every field reaching the tier under its own name."""

from __future__ import annotations

from dataclasses import asdict, fields

import pytest

from kvcontract.config import MooncakeTierConfig, RedisTierConfig
from kvcontract.config.tiers import RemoteTierConfig
from kvcontract.tiers.remote_tier import RemoteTierOptions

OPTIONS = RemoteTierOptions(
    namespace="scoped",
    io_threads=3,
    lookup_timeout=0.5,
    retry_interval=2.0,
    start_degraded=True,
    job_deadline=None,
    known_keys=7,
    enable_events=True,
)
"""A value other than a config's default for each option a config sets."""
SET = {name: value for name, value in asdict(OPTIONS).items() if name != "lookup_wait"}


@pytest.mark.parametrize(
    "config",
    [RedisTierConfig.model_validate({"url": "redis://a:1", **SET}), MooncakeTierConfig.model_validate(SET)],
)
def test_each_option_a_config_sets_reaches_the_tier(config: RemoteTierConfig) -> None:
    assert config.options() == OPTIONS


def test_a_config_sets_every_option_but_the_lookup_wait_of_library_callers() -> None:
    options = {option.name for option in fields(RemoteTierOptions)}
    assert options - set(RemoteTierConfig.model_fields) == {"lookup_wait"}
    assert all(getattr(RemoteTierConfig(), name) != value for name, value in SET.items())
