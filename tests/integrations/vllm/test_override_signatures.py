"""The vLLM adapters accept at least what vLLM's bases accept: the class-creation rule, applied to what they subclass."""

from __future__ import annotations

import warnings

import pytest

from kvcontract.contracts.enforcement.signatures import check_override_signatures
from kvcontract.enforce import ContractHintWarning
from kvcontract.integrations.vllm.manager import KVContractOffloadingManager
from kvcontract.integrations.vllm.secondary_tier import KVContractSecondaryTier
from kvcontract.integrations.vllm.spec import KVContractOffloadingSpec
from kvcontract.integrations.vllm.worker import KVContractOffloadingWorker
from tests.integrations.support import engine_methods


@pytest.mark.parametrize(
    "adapter",
    [KVContractOffloadingManager, KVContractOffloadingWorker, KVContractSecondaryTier, KVContractOffloadingSpec],
    ids=lambda adapter: adapter.__name__,
)
def test_no_adapter_narrows_what_vllm_passes(adapter: type) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ContractHintWarning)  # vLLM names some hints only under TYPE_CHECKING
        check_override_signatures(adapter, engine_methods(adapter))
