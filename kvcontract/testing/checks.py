"""The kit's entry points: one call per kind of component, each raising ``ConformanceError`` on a broken rule."""

from __future__ import annotations

from kvcontract.testing.conformance import ProfileName, run_machine
from kvcontract.testing.manager_rules import ManagerFactory, manager_machine
from kvcontract.testing.policy_rules import PolicyFactory, policy_machine
from kvcontract.testing.tier_rules import CorruptHook, TierFactory, tier_machine
from kvcontract.testing.worker_rules import WorkerFactory, worker_machine

__all__ = ["check_manager", "check_policy", "check_tier", "check_worker"]


def _name(factory: object) -> str:
    return str(getattr(factory, "__qualname__", None) or type(factory).__name__)


def check_policy(
    factory: PolicyFactory, *, order_model: PolicyFactory | None = None, profile: ProfileName = "fast"
) -> None:
    """Check a ``CachePolicy``: ``factory(capacity)`` builds it; ``order_model`` (a reference policy) also checks its victims."""
    run_machine(policy_machine(factory, order_model), _name(factory), profile)


def check_manager(factory: ManagerFactory, *, profile: ProfileName = "fast") -> None:
    """Check an ``OffloadingManager``: ``factory(capacity)`` builds an empty one holding that many blocks."""
    run_machine(manager_machine(factory), _name(factory), profile)


def check_tier(factory: TierFactory, *, corrupt: CorruptHook | None = None, profile: ProfileName = "fast") -> None:
    """Check a ``SecondaryTier``: ``factory(host_blocks)`` builds an empty one; ``corrupt(tier, key)`` damages a stored value."""
    run_machine(tier_machine(factory, corrupt), _name(factory), profile)


def check_worker(
    factory: WorkerFactory, *, layer_shape: tuple[int, ...] = (2, 16), layers: int = 2, profile: ProfileName = "fast"
) -> None:
    """Check an ``OffloadingWorker``: ``factory(kv_caches, num_host_blocks)`` builds one over uint8 layer tensors."""
    run_machine(worker_machine(factory, layer_shape, layers), _name(factory), profile)
