"""The conformance kit: checks that a custom policy, manager, tier or worker keeps its contract's semantics.

Types and ``@override`` are checked by mypy, pyright and ``kvcontract-lint``; this kit checks
behaviour. Each ``check_*`` runs a hypothesis state machine against a small reference model
and raises :class:`ConformanceError` naming the broken rule and the shrunk call sequence.
Needs hypothesis: ``pip install 'kvcontract[testing]'``.
"""

from kvcontract.extras import MissingExtraError as _MissingExtraError

try:
    import hypothesis as _hypothesis
except ImportError:  # pragma: no cover - exercised without the extra only
    raise _MissingExtraError(
        "kvcontract.testing needs hypothesis: pip install 'kvcontract[testing]'", extra="testing"
    ) from None

from kvcontract.testing.checks import check_manager, check_policy, check_tier, check_worker
from kvcontract.testing.conformance import PROFILES, ConformanceError, Profile
from kvcontract.testing.identity import example_identity

del _hypothesis, _MissingExtraError

__all__ = [
    "PROFILES",
    "ConformanceError",
    "Profile",
    "check_manager",
    "check_policy",
    "check_tier",
    "check_worker",
    "example_identity",
]
