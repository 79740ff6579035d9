"""The SGLang backend accepts at least what SGLang's storage base accepts: the class-creation rule, applied to it."""

from __future__ import annotations

import warnings

from kvcontract.contracts.enforcement.signatures import check_override_signatures
from kvcontract.enforce import ContractHintWarning
from kvcontract.integrations.sglang.storage import KVContractHiCacheStorage
from tests.integrations.support import engine_methods


def test_the_backend_narrows_nothing_sglang_passes() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ContractHintWarning)  # SGLang names some hints only under TYPE_CHECKING
        check_override_signatures(KVContractHiCacheStorage, engine_methods(KVContractHiCacheStorage))
