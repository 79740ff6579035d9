"""The example's components keep the contracts' semantics: one line each with kvcontract's kit."""

from __future__ import annotations

from custom_policy import FIFOPolicy, MetricsManager

from kvcontract.managers import CPUOffloadingManager
from kvcontract.testing.pytest_plugin import Conformance


def test_fifo_keeps_the_policy_contract(conformance: Conformance) -> None:
    conformance.check_policy(FIFOPolicy)


def test_the_metrics_decorator_keeps_the_manager_contract(conformance: Conformance) -> None:
    conformance.check_manager(lambda capacity: MetricsManager(CPUOffloadingManager(capacity, "fifo-example")))
