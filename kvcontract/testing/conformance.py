"""Running a conformance machine and turning a broken rule into a :class:`ConformanceError`.

Each machine states the contract's rules with :func:`require`; hypothesis searches for a
call sequence that breaks one and shrinks it; the error names the rule in the contract's own
words and shows the shrunk sequence, ready to paste into a regression test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import HypothesisException
from hypothesis.reporting import with_reporter
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

__all__ = ["PROFILES", "ConformanceError", "Profile", "RuleBroken", "refuses", "require", "run_machine"]


class ConformanceError(AssertionError):
    """A component broke a rule of its contract: ``rule`` in the contract's words, ``steps`` to reproduce it."""

    def __init__(self, component: str, rule: str, steps: str, detail: str = "") -> None:
        self.component = component
        self.rule = rule
        self.steps = steps
        self.detail = detail
        message = f"{component} breaks the rule: {rule}"
        if detail:
            message += f"\n  {detail}"
        super().__init__(f"{message}\nShrunk call sequence that reproduces it:\n{steps}")


class RuleBroken(AssertionError):
    """Raised inside a machine when a rule fails; the runner wraps it in a :class:`ConformanceError`."""

    def __init__(self, rule: str, detail: str) -> None:
        self.rule = rule
        self.detail = detail
        super().__init__(f"{rule}: {detail}")


def require(condition: bool, rule: str, detail: str = "") -> None:
    """Fail the machine with ``rule`` (and what was seen) unless ``condition`` holds."""
    if not condition:
        raise RuleBroken(rule, detail)


def refuses(call: Callable[[], object], refusals: tuple[type[Exception], ...]) -> bool:
    """Whether ``call()`` raises one of ``refusals``, the errors a contract lets a component refuse a call with."""
    try:
        call()
    except refusals:
        return True
    return False


@dataclass(frozen=True, slots=True)
class Profile:
    """How hard to look: examples (call sequences) and steps per example."""

    examples: int
    steps: int


PROFILES: dict[str, Profile] = {"fast": Profile(examples=100, steps=30), "thorough": Profile(examples=500, steps=60)}
"""``fast`` stays within about 30 s per component on a small machine; ``thorough`` is for CI."""

_PHASES = (Phase.explicit, Phase.generate, Phase.shrink)
"""Search and shrink; no example database (a verdict must not depend on earlier runs) and no
``explain`` phase, which took two thirds of the time of a failing check and adds nothing the
shrunk call sequence does not show."""

ProfileName = Literal["fast", "thorough"]


def run_machine(machine: type[RuleBasedStateMachine], component: str, profile: ProfileName) -> None:
    """Run ``machine`` under ``profile``; raise :class:`ConformanceError` if a rule breaks.

    The search is derandomized: the same component gets the same verdict on every run, so the
    kit can gate a CI without flaking; ``thorough`` searches a wider, equally fixed set of sequences.
    """
    chosen = PROFILES[profile]
    lines: list[str] = []
    try:
        with with_reporter(lambda text: lines.append(str(text))):
            run_state_machine_as_test(
                machine,
                settings=settings(
                    max_examples=chosen.examples,
                    stateful_step_count=chosen.steps,
                    deadline=None,
                    database=None,
                    derandomize=True,
                    phases=_PHASES,
                    print_blob=False,
                    suppress_health_check=[
                        HealthCheck.too_slow,
                        HealthCheck.filter_too_much,
                        HealthCheck.data_too_large,
                    ],
                ),
            )
    except RuleBroken as broken:
        raise ConformanceError(component, broken.rule, _steps(lines, broken), broken.detail) from None
    except HypothesisException:
        raise
    except Exception as error:  # any other exception from the component is a broken rule too
        rule = "every call the contract allows returns without raising"
        detail = f"{type(error).__name__}: {error}"
        raise ConformanceError(component, rule, _steps(lines, error), detail) from error


def _steps(lines: list[str], error: BaseException) -> str:
    """The reproducing call sequence hypothesis reported (as the error's notes, or printed), one call a line.

    Values a call drew inside (hypothesis' ``Draw n:`` lines) follow it as a comment; the machine's
    own invariant checks and hypothesis' explanation of covered lines are left out.
    """
    reported = [*lines, *getattr(error, "__notes__", ())]
    calls: list[str] = []
    draws: list[str] = []
    for text in reported:
        for line in str(text).splitlines():
            line = line.strip()
            if line.startswith("Explanation"):
                break
            if line.startswith("Draw ") and ":" in line:
                draws.append(line.partition(":")[2].strip())
            elif line.startswith("state") and not line.endswith(_INVARIANT_CALLS):
                calls.append(f"{line}  # draws: {', '.join(draws)}" if draws else line)
                draws = []
    return "\n".join(f"    {line}" for line in calls) or "    (no steps reported)"


_INVARIANT_CALLS = (".consistent()", ".lookups_and_stats()")
