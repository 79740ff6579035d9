"""The host side of a transfer as vLLM carries it from the scheduler to the worker.

vLLM hands the manager's ``LoadStoreSpec`` to the worker untouched, inside its connector
metadata; this wrapper carries kvcontract's own spec through unchanged, so the scheduler
side never copies block ids into vLLM's numpy form and the worker gets back exactly what
the kvcontract manager planned.
"""

from __future__ import annotations

from typing_extensions import override
from vllm.v1.kv_offload.base import LoadStoreSpec as VLLMLoadStoreSpec

from kvcontract.contracts import LoadStoreSpec

__all__ = ["KVContractHostSpec"]


class KVContractHostSpec(VLLMLoadStoreSpec):
    """A kvcontract manager's spec (host block ids, in key order) inside vLLM's ``LoadStoreSpec``."""

    def __init__(self, spec: LoadStoreSpec) -> None:
        self.spec: LoadStoreSpec = spec

    @override
    def __repr__(self) -> str:
        return f"KVContractHostSpec({self.spec!r})"
