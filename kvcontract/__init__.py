"""kvcontract: KV-cache offloading for LLM inference engines, with checked contracts."""

from kvcontract import contracts
from kvcontract.contracts import *  # noqa: F403 - every contract is a name of the package itself (contracts.__all__)
from kvcontract.enforce import ContractDefinitionError, ContractViolation

__version__ = "0.1.0"

__all__ = ["ContractDefinitionError", "ContractViolation"]
__all__ += contracts.__all__
