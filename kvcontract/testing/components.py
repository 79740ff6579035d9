"""`kvcontract check`'s second half: the components a project names in pyproject.toml, run through the kit.

``[tool.kvcontract] components = ["pkg.mod:MyPolicy", ...]`` names classes; the kind (policy,
manager, tier, worker) comes from the contract the class inherits. A factory function (or a
class whose constructor differs from the kit's) is named with its kind:
``{ path = "pkg.mod:make_tier", kind = "tier" }``. Naming a component imports it, which runs
its module's code, like any plugin.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, cast

from kvcontract.contracts import CachePolicy, OffloadingManager, OffloadingWorker, SecondaryTier
from kvcontract.testing.checks import check_manager, check_policy, check_tier, check_worker
from kvcontract.testing.conformance import ConformanceError, ProfileName
from kvcontract.testing.manager_rules import ManagerFactory
from kvcontract.testing.policy_rules import PolicyFactory
from kvcontract.testing.tier_rules import TierFactory
from kvcontract.testing.worker_rules import WorkerFactory

__all__ = ["ComponentError", "ComponentOutcome", "check_component", "component_entries", "read_components", "resolve"]

Kind = Literal["policy", "manager", "tier", "worker"]
_KINDS: tuple[tuple[type, Kind], ...] = (
    (CachePolicy, "policy"),
    (OffloadingManager, "manager"),
    (SecondaryTier, "tier"),
    (OffloadingWorker, "worker"),
)
_KIND_NAMES: dict[str, Kind] = {name: name for _, name in _KINDS}


class ComponentError(ValueError):
    """A component entry that cannot be resolved; the message names the entry and the fix."""


@dataclass(frozen=True, slots=True)
class ComponentSpec:
    """One component to check: where it is and what kind of contract it keeps."""

    path: str
    kind: Kind
    factory: Callable[..., object]


@dataclass(frozen=True, slots=True)
class ComponentOutcome:
    """The kit's verdict on one component, for one line of output."""

    path: str
    kind: Kind
    seconds: float
    error: ConformanceError | None

    @property
    def line(self) -> str:
        """``path: kind conforms (1.2 s)`` or ``path: kind breaks: rule``."""
        if self.error is None:
            return f"{self.path}: {self.kind} conforms ({self.seconds:.1f} s)"
        return f"{self.path}: {self.kind} breaks: {self.error.rule}"

    @property
    def reproducer(self) -> str:
        """What was seen and the shrunk call sequence that breaks the rule, indented under :attr:`line`
        (empty when the component conforms)."""
        if self.error is None:
            return ""
        seen = f"  {self.error.detail}\n" if self.error.detail else ""
        steps = "".join(f"    {step}\n" for step in self.error.steps.splitlines())
        return f"{seen}  Shrunk call sequence that reproduces it:\n{steps}"


def read_components(table: Mapping[str, object]) -> list[ComponentSpec]:
    """The components of ``[tool.kvcontract]`` (``table``), imported and with their kind."""
    return [resolve(entry) for entry in component_entries(table)]


def component_entries(table: Mapping[str, object]) -> list[object]:
    """The entries of ``[tool.kvcontract] components``, not yet imported."""
    entries = table.get("components", [])
    if not isinstance(entries, list):
        raise ComponentError(
            "[tool.kvcontract] components: give a list of 'module:Name' strings or {path, kind} tables"
        )
    return cast("list[object]", entries)  # a TOML array: its items are checked one by one by resolve()


def resolve(entry: object) -> ComponentSpec:
    """One entry of ``components``, imported, with its kind; :class:`ComponentError` in one line if it cannot be."""
    kind: str | None = None
    if isinstance(entry, dict):
        fields = cast("dict[str, object]", entry)  # a TOML table has string keys
        path, kind = fields.get("path"), cast("str | None", fields.get("kind"))
    else:
        path = entry
    if not isinstance(path, str) or ":" not in path:
        raise ComponentError(f"component {entry!r}: name it as 'package.module:Name'")
    module_name, _, attribute = path.partition(":")
    try:
        target: object = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ComponentError(
            f"component {path}: cannot import it ({error}); install the project that holds it "
            "(pip install -e . in its folder) or put its folder on PYTHONPATH"
        ) from None
    except Exception as error:  # its module raised while running: a class refused at creation, most often
        raise ComponentError(
            f"component {path}: importing {module_name} raised {type(error).__name__}: {error}"
        ) from error
    if kind is None:
        # Implementations inherit the contract explicitly, so its place in the MRO tells the kind.
        ancestors = target.__mro__ if isinstance(target, type) else ()
        kind = next((name for base, name in _KINDS if base in ancestors), None)
        if kind is None:
            raise ComponentError(
                f'component {path}: not a contract subclass; name its kind: {{ path = {path!r}, kind = "policy" }}'
            )
    known = _KIND_NAMES.get(kind)
    if known is None:
        raise ComponentError(f"component {path}: kind {kind!r} is not one of {', '.join(_KIND_NAMES)}")
    if not callable(target):
        raise ComponentError(f"component {path}: not a class or factory function")
    return ComponentSpec(path, known, cast("Callable[..., object]", target))  # checked callable just above


def check_component(spec: ComponentSpec, profile: ProfileName) -> ComponentOutcome:
    """Run the kit's check for ``spec``'s kind and time it."""
    # The kind (declared, or read from the contract the class inherits) says which factory it is.
    runners: dict[Kind, Callable[[], None]] = {
        "policy": lambda: check_policy(cast("PolicyFactory", spec.factory), profile=profile),
        "manager": lambda: check_manager(cast("ManagerFactory", spec.factory), profile=profile),
        "tier": lambda: check_tier(cast("TierFactory", spec.factory), profile=profile),
        "worker": lambda: check_worker(cast("WorkerFactory", spec.factory), profile=profile),
    }
    start = time.monotonic()
    try:
        runners[spec.kind]()
    except ConformanceError as error:
        return ComponentOutcome(spec.path, spec.kind, time.monotonic() - start, error)
    return ComponentOutcome(spec.path, spec.kind, time.monotonic() - start, None)
