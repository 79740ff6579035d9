"""What vLLM's per-step hooks reach: a kvcontract manager with work between scheduler steps.

vLLM calls ``on_schedule_end`` once, last, in every scheduler step, and keeps the engine
stepping while ``has_pending_work`` is true, even with no request scheduled. The tiering
manager needs both: its promotions are submitted at the end of a step, and its tier jobs
land only when something polls it; without the hooks a cascade in flight pins its primary
blocks until the next request comes, and a promotion can find no room.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kvcontract.contracts import OffloadingManager
from kvcontract.managers import ForwardingManager

__all__ = ["WorksBetweenSteps", "find_work_between_steps"]


@runtime_checkable
class WorksBetweenSteps(Protocol):
    """A manager with jobs that progress between scheduler steps (as :class:`~kvcontract.managers.TieringOffloadingManager`)."""

    def end_step(self) -> None:
        """The scheduler's step is over: land finished jobs and submit what the step queued."""
        ...

    def has_pending_work(self) -> bool:
        """Whether jobs are still in flight or queued, so the engine should keep stepping."""
        ...


def find_work_between_steps(manager: OffloadingManager) -> WorksBetweenSteps | None:
    """The manager under ``manager``'s decorators that works between steps, or ``None``.

    Decorators (:class:`~kvcontract.managers.ForwardingManager`) are looked through: the
    hooks touch no request's state, so going past a decorator skips nothing it does.
    """
    current = manager
    while not isinstance(current, WorksBetweenSteps):
        if not isinstance(current, ForwardingManager):
            return None
        current = current.inner
    return current
