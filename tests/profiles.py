"""Hypothesis depth: the ``fast`` profile for local runs (the default), ``thorough`` for CI.

``.ci/run`` sets ``KVCONTRACT_HYPOTHESIS_PROFILE=thorough``, which runs every state machine for
at least ``THOROUGH_STEPS`` steps; locally each machine keeps its own small example count.
"""

from __future__ import annotations

import math
import os

from hypothesis import HealthCheck, settings

PROFILE_VARIABLE = "KVCONTRACT_HYPOTHESIS_PROFILE"
PROFILES = ("fast", "thorough")
THOROUGH_STEPS = 10_000

PROFILE = os.environ.get(PROFILE_VARIABLE, "fast")
if PROFILE not in PROFILES:
    raise ValueError(f"{PROFILE_VARIABLE}={PROFILE!r}: use one of {', '.join(PROFILES)}")
THOROUGH = PROFILE == "thorough"


def stateful_settings(*, steps: int, fast_examples: int) -> settings:
    """Settings of a state machine that runs ``steps`` steps per example.

    Fast: ``fast_examples`` examples. Thorough: enough examples for ``THOROUGH_STEPS`` steps.
    """
    examples = math.ceil(THOROUGH_STEPS / steps) if THOROUGH else fast_examples
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
