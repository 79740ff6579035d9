"""Runtime enforcement of the contracts: ``@override`` and the hints of overrides at class creation, beartype call checks.

The public names of :mod:`kvcontract.contracts.enforcement`, which holds the code beside the
contracts. Three modes, from ``KVCONTRACT_CHECKS`` or :func:`configure`: ``off`` removes the
wrappers; ``on`` (the default) checks every argument's type but only one element of each
sequence per call (beartype's O(1) strategy, sampling the first element), so a call costs the
same for 1 key or 10,000; ``full`` checks every element of every container argument and
return value (O(n), for tests and CI).
"""

from kvcontract.contracts.enforcement.call_checks import unchecked
from kvcontract.contracts.enforcement.classes import configure, enforce_class
from kvcontract.contracts.enforcement.errors import (
    ContractDefinitionError,
    ContractHintWarning,
    ContractViolation,
    contract_violations,
)
from kvcontract.contracts.enforcement.mode import (
    CHECK_MODES,
    ENV_VAR,
    CheckMode,
    checks_enabled,
    checks_mode,
)
from kvcontract.contracts.enforcement.proxies import checked

__all__ = [
    "CHECK_MODES",
    "ENV_VAR",
    "CheckMode",
    "ContractDefinitionError",
    "ContractHintWarning",
    "ContractViolation",
    "checked",
    "checks_enabled",
    "checks_mode",
    "configure",
    "contract_violations",
    "enforce_class",
    "unchecked",
]
