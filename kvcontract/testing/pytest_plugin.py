"""The kit's pytest plugin (entry point ``pytest11``): a ``conformance`` fixture and ``--kvcontract-thorough``.

A downstream test is one line: ``def test_policy(conformance): conformance.check_policy(MyPolicy)``.
The fast profile is the default; ``--kvcontract-thorough`` (or ``KVCONTRACT_CONFORMANCE=thorough``)
selects the thorough one for CI. The kit itself is imported only when the fixture is used, so
the plugin costs nothing, and needs no hypothesis, in test runs that do not use it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kvcontract.testing.conformance import ProfileName
    from kvcontract.testing.manager_rules import ManagerFactory
    from kvcontract.testing.policy_rules import PolicyFactory
    from kvcontract.testing.tier_rules import CorruptHook, TierFactory
    from kvcontract.testing.worker_rules import WorkerFactory

__all__ = ["Conformance", "conformance", "pytest_addoption"]

_VARIABLE = "KVCONTRACT_CONFORMANCE"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--kvcontract-thorough``."""
    parser.getgroup("kvcontract").addoption(
        "--kvcontract-thorough",
        action="store_true",
        help=f"run the conformance kit's thorough profile (also {_VARIABLE}=thorough)",
    )


@dataclass(frozen=True, slots=True)
class Conformance:
    """The kit's checks, bound to the profile this test run selected."""

    profile: ProfileName

    def check_policy(self, factory: PolicyFactory, *, order_model: PolicyFactory | None = None) -> None:
        """``kvcontract.testing.check_policy`` with this run's profile."""
        from kvcontract.testing import check_policy

        check_policy(factory, order_model=order_model, profile=self.profile)

    def check_manager(self, factory: ManagerFactory) -> None:
        """``kvcontract.testing.check_manager`` with this run's profile."""
        from kvcontract.testing import check_manager

        check_manager(factory, profile=self.profile)

    def check_tier(self, factory: TierFactory, *, corrupt: CorruptHook | None = None) -> None:
        """``kvcontract.testing.check_tier`` with this run's profile."""
        from kvcontract.testing import check_tier

        check_tier(factory, corrupt=corrupt, profile=self.profile)

    def check_worker(self, factory: WorkerFactory, *, layer_shape: tuple[int, ...] = (2, 16), layers: int = 2) -> None:
        """``kvcontract.testing.check_worker`` with this run's profile."""
        from kvcontract.testing import check_worker

        check_worker(factory, layer_shape=layer_shape, layers=layers, profile=self.profile)


@pytest.fixture
def conformance(request: pytest.FixtureRequest) -> Conformance:
    """The conformance kit with the profile of this run: fast unless thorough was asked for."""
    thorough = bool(request.config.getoption("--kvcontract-thorough")) or os.environ.get(_VARIABLE) == "thorough"
    return Conformance("thorough" if thorough else "fast")
