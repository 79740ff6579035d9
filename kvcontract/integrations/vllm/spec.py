"""``KVContractOffloadingSpec``: the out-of-tree ``OffloadingSpec`` vLLM's factory loads by module path.

``kv_connector_extra_config = {"spec_name": "KVContractOffloadingSpec",
"spec_module_path": "kvcontract.integrations.vllm", "kvcontract": {...}}``. The scheduler
process calls :meth:`get_manager`, each worker :meth:`get_worker`; both assemble what the
kvcontract config describes with :mod:`kvcontract.assembly`, from the same checked config.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import override
from vllm.v1.kv_offload.base import CanonicalKVCaches, OffloadingMetricMetadata, OffloadingSpec
from vllm.v1.kv_offload.config import OffloadingConfig

from kvcontract.assembly import apply_runtime_checks, build_manager, build_worker
from kvcontract.config import KVContractConfig
from kvcontract.contracts import BlockIdentity
from kvcontract.integrations.vllm.config_info import KVContractOffloadingInfo
from kvcontract.integrations.vllm.connector_config import connector_config
from kvcontract.integrations.vllm.identity import vllm_identity
from kvcontract.integrations.vllm.manager import KVContractOffloadingManager
from kvcontract.integrations.vllm.stats import metric_definitions
from kvcontract.integrations.vllm.worker import KVContractOffloadingWorker, worker_tensors
from kvcontract.observe import whatif_observer

__all__ = ["KVContractOffloadingSpec"]


class KVContractOffloadingSpec(OffloadingSpec):
    """Offloading backed by kvcontract: its managers, policies, tiers and transfer engine.

    The config is checked when the spec is made, so a bad key or field stops vLLM at start
    with one error naming it, before any memory is allocated. Its tiers keep blocks of the
    :attr:`identity` derived from vLLM's config, so engines of other models never share them.
    """

    def __init__(self, config: OffloadingConfig) -> None:
        super().__init__(config)
        self.kvcontract_config: KVContractConfig = connector_config(config)
        self.identity: BlockIdentity = vllm_identity(
            config, self.kvcontract_config, self.kvcontract_config.kv_layout.offload_block_bytes
        )
        self.info: KVContractOffloadingInfo = KVContractOffloadingInfo.describe(config, self.kvcontract_config)
        self._manager: KVContractOffloadingManager | None = None
        self._worker: KVContractOffloadingWorker | None = None

    @classmethod
    @override
    def build_metric_definitions(cls, extra_config: dict[str, Any]) -> dict[str, OffloadingMetricMetadata]:
        return metric_definitions()

    @classmethod
    @override
    def config_info_keys(cls, extra_config: dict[str, Any]) -> tuple[str, ...]:
        return KVContractOffloadingInfo.config_info_keys()

    @override
    def get_manager(self) -> KVContractOffloadingManager:
        if self._manager is None:
            apply_runtime_checks(self.kvcontract_config)
            self._manager = KVContractOffloadingManager(
                build_manager(self.kvcontract_config, identity=self.identity),
                events=self.config.enable_kv_cache_events,
                info=self.info.as_config_info(),
                observer=whatif_observer(self.kvcontract_config),
            )
        return self._manager

    @override
    def get_worker(self, kv_caches: CanonicalKVCaches) -> KVContractOffloadingWorker:
        if self._worker is None:
            inner = build_worker(self.kvcontract_config, worker_tensors(kv_caches))
            self._worker = KVContractOffloadingWorker(inner, kv_caches, blocks_per_offload_block=self.blocks_per_chunk)
        return self._worker
