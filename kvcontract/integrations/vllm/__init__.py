"""kvcontract as a vLLM offloading backend: an ``OffloadingSpec`` and a ``SecondaryTierManager``.

vLLM (0.34 and 0.33) loads the spec by module path (``"spec_name": "KVContractOffloadingSpec",
"spec_module_path": "kvcontract.integrations.vllm"``) and a tier the same way
(``"type": "KVContractSecondaryTier", "module_path": "kvcontract.integrations.vllm"``).
Importing this package checks the installed vLLM first and fails with one line on a
release it does not support.
"""

from kvcontract.integrations.vllm.version import SUPPORTED_VLLM, UnsupportedVLLMError, check_vllm_version

check_vllm_version()

from kvcontract.integrations.vllm.host_spec import KVContractHostSpec  # noqa: E402  (after the version check)
from kvcontract.integrations.vllm.manager import KVContractOffloadingManager, request_tokens  # noqa: E402
from kvcontract.integrations.vllm.request_tokens import RequestTokens  # noqa: E402
from kvcontract.integrations.vllm.secondary_tier import KVContractSecondaryTier  # noqa: E402
from kvcontract.integrations.vllm.spec import KVContractOffloadingSpec  # noqa: E402
from kvcontract.integrations.vllm.worker import KVContractOffloadingWorker  # noqa: E402

__all__ = [
    "SUPPORTED_VLLM",
    "KVContractHostSpec",
    "KVContractOffloadingManager",
    "KVContractOffloadingSpec",
    "KVContractOffloadingWorker",
    "KVContractSecondaryTier",
    "RequestTokens",
    "UnsupportedVLLMError",
    "check_vllm_version",
    "request_tokens",
]
