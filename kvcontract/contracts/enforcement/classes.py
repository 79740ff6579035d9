"""Class processing: a contract implementer checked at creation, its methods put in the mode asked for."""

from __future__ import annotations

from kvcontract.contracts.enforcement.call_checks import ORIGINAL_ATTRIBUTE, wrap
from kvcontract.contracts.enforcement.markers import (
    check_mixin_override_markers,
    check_override_markers,
)
from kvcontract.contracts.enforcement.members import (
    FROM_MIXIN_ATTRIBUTE,
    contract_methods,
    from_mixin,
    is_contract,
)
from kvcontract.contracts.enforcement.mode import Settings, settings
from kvcontract.contracts.enforcement.signatures import check_override_signatures

__all__ = ["configure", "enforce_class"]


def enforce_class(cls: type) -> None:
    """Check ``cls``'s overrides for ``@override`` and against their contract's hints, and wrap its contract
    methods with call checks.

    Contract methods ``cls`` takes from a plain mixin (a class outside the contract
    hierarchy) are held to the same rules and wrapped on ``cls``. Protocols that extend a
    contract are contracts themselves and are left as they are. Both rules hold whatever the
    call checks' mode: they cost once per class, not per call.
    """
    if is_contract(cls):
        return
    check_override_markers(cls)
    check_mixin_override_markers(cls)
    check_override_signatures(cls)
    state = settings()
    state.classes.add(cls)
    _apply(cls, state)


def configure(*, checks: bool | None = None, full: bool | None = None) -> None:
    """Switch the call checks on or off, and between sampled and full, for every contract class.

    ``full=True`` checks every element of container arguments and returns, ``full=False`` one
    per call; ``None`` leaves a setting as it is, so ``configure(checks=True)`` keeps a full
    mode that ``KVCONTRACT_CHECKS=full`` chose. Off restores the original methods, so an
    unchecked call costs nothing extra.
    """
    state = settings()
    new_checks = state.checks if checks is None else checks
    new_full = state.full if full is None else full
    if (new_checks, new_full) == (state.checks, state.full):
        return
    state.checks, state.full = new_checks, new_full
    for cls in list(state.classes):
        _apply(cls, state)


def _apply(cls: type, state: Settings) -> None:
    """Put ``cls``'s methods in the state ``state`` asks for: originals, or checked wrappers."""
    for name, member in list(cls.__dict__.items()):
        if getattr(member, FROM_MIXIN_ATTRIBUTE, False):
            delattr(cls, name)
        elif (original := getattr(member, ORIGINAL_ATTRIBUTE, None)) is not None:
            setattr(cls, name, original)
    if not state.checks:
        return
    for name, contract_fn in contract_methods(cls).items():
        if name in cls.__dict__:
            setattr(cls, name, wrap(cls, name, cls.__dict__[name], contract_fn, state.full))
        elif (provided := from_mixin(cls, name)) is not None:
            wrapper = wrap(cls, name, provided[1], contract_fn, state.full)
            setattr(wrapper, FROM_MIXIN_ATTRIBUTE, True)
            setattr(cls, name, wrapper)
