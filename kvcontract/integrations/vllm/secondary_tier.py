"""``KVContractSecondaryTier``: any kvcontract tier behind vLLM's ``SecondaryTierManager``.

For users who keep vLLM's own CPU manager and ``TieringOffloadingSpec``:
``secondary_tiers: [{"type": "KVContractSecondaryTier", "module_path":
"kvcontract.integrations.vllm", "tier": {"kind": "file", "path": ..., "capacity": ...}}]``.
``tier`` is a kvcontract tier config of any kind the config knows (file, redis...), built
with :func:`kvcontract.assembly.build_tier` over vLLM's primary host memory, so a new
kvcontract tier plugs in with no change here.

vLLM's jobs carry numpy chunk ids and ``Collection`` keys; they become a ``TierJob`` once
per job. A job the tier refuses to start is reported failed on the next poll, as vLLM
expects every submitted job back. A kvcontract tier reports a job only once its I/O is over,
so a failed promotion never needs vLLM 0.34's ``deferred_release``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar, cast

import torch
from typing_extensions import override
from vllm.v1.kv_offload.base import Locality, Medium, OffloadingSpec, RequestOffloadingContext
from vllm.v1.kv_offload.base import LookupResult as VLLMLookupResult
from vllm.v1.kv_offload.base import OffloadingEvent as VLLMOffloadingEvent
from vllm.v1.kv_offload.base import OffloadKey as VLLMOffloadKey
from vllm.v1.kv_offload.base import ReqContext as VLLMReqContext
from vllm.v1.kv_offload.tiering.backpressure import BackpressureDetector
from vllm.v1.kv_offload.tiering.base import JobResult, SecondaryTierManager, TransferJob
from vllm.v1.metrics.cache_hit_source import CacheHitSource

from kvcontract.assembly import build_tier
from kvcontract.config import ConfigError, KVContractConfig, TieringManagerConfig, load_config
from kvcontract.contracts import BlockIdentity, LookupResult, OffloadKey, SecondaryTier, TierJob
from kvcontract.integrations.vllm.capacity import size_in_blocks
from kvcontract.integrations.vllm.config_info import KVContractTierInfo
from kvcontract.integrations.vllm.events import as_vllm_events
from kvcontract.integrations.vllm.identity import vllm_identity
from kvcontract.integrations.vllm.keys import as_contract_keys
from kvcontract.integrations.vllm.releases import ConfigInfoMapping

__all__ = ["KVContractSecondaryTier"]

_DRAIN_PAUSE_SECONDS = 0.0005
_RESULTS = {
    LookupResult.HIT: VLLMLookupResult.HIT,
    LookupResult.MISS: VLLMLookupResult.MISS,
    LookupResult.HIT_PENDING: VLLMLookupResult.RETRY,
    LookupResult.RETRY: VLLMLookupResult.RETRY,
}
"""vLLM's tiers answer RETRY while a block is in transfer; kvcontract's HIT_PENDING is that."""

_OPTIONS = frozenset({"tier", "kv_layout", "identity", "locality"})


def host_blocks_of(primary_kv_view: memoryview) -> torch.Tensor:
    """vLLM's primary host memory as kvcontract's host blocks: ``(blocks, block_bytes)`` uint8, no copy."""
    if primary_kv_view.strides is None or not primary_kv_view.strides or primary_kv_view.strides[0] < 1:
        raise ValueError("vLLM's primary memoryview has no block stride: it is not a block pool")
    block_bytes = primary_kv_view.strides[0]
    flat = torch.frombuffer(primary_kv_view.cast("B"), dtype=torch.uint8)
    return flat.view(-1, block_bytes)


def tier_config(
    tier: object,
    block_bytes: int,
    kv_layout: object = None,
    source: str = "secondary_tiers",
    identity: object = None,
) -> KVContractConfig:
    """A kvcontract config whose one secondary tier is what ``tier`` describes, its capacity in blocks.

    ``kv_layout`` and ``identity`` (optional) are those sections of a kvcontract config; vLLM's
    own config sets the block identity's model, layout and ranks (:func:`vllm_identity`).
    """
    if not isinstance(tier, Mapping):
        raise ConfigError(
            source, ['tier: give a kvcontract tier config, e.g. {"kind": "file", "path": ..., "capacity": ...}']
        )
    fields = {str(key): value for key, value in cast("Mapping[object, object]", tier).items()}  # checked: a mapping
    if "capacity" in fields:
        try:
            fields["capacity"] = size_in_blocks(fields["capacity"], block_bytes)
        except ValueError as error:
            raise ConfigError(source, [f"tier.capacity: {error}"]) from None
    base: dict[str, object] = {"manager": {"kind": "tiering", "secondary": [fields]}}
    if kv_layout is not None:
        base["kv_layout"] = kv_layout
    if identity is not None:
        base["identity"] = identity
    try:
        config = load_config(base=base)
    except ConfigError as error:
        raise ConfigError(
            source, [problem.replace("manager.secondary.0.", "tier.") for problem in error.problems]
        ) from None
    return config


class KVContractSecondaryTier(SecondaryTierManager):
    """vLLM's secondary tier, backed by the kvcontract tier its ``tier`` config describes."""

    medium: ClassVar[Medium | None] = Medium.STORAGE
    cache_hit_source: ClassVar[CacheHitSource] = CacheHitSource("disk")  # by value, as manager.py's _HOST

    def __init__(
        self,
        offloading_spec: OffloadingSpec,
        primary_kv_view: memoryview,
        tier_type: str,
        backpressure_detector: BackpressureDetector | None = None,
        **options: Any,
    ) -> None:
        super().__init__(offloading_spec, primary_kv_view, tier_type, backpressure_detector)
        unknown = sorted(key for key in options if key not in _OPTIONS)
        if unknown:
            raise ConfigError(
                "secondary_tiers",
                [
                    f"{key}: unknown key; known: type, module_path, backpressure, tier, kv_layout, identity, locality"
                    for key in unknown
                ],
            )
        locality = options.get("locality")
        self.locality: Locality | None = Locality(str(locality).upper()) if locality is not None else Locality.LOCAL
        host = host_blocks_of(primary_kv_view)
        config = tier_config(
            options.get("tier"), self.block_size_bytes, options.get("kv_layout"), identity=options.get("identity")
        )
        manager = config.manager
        assert isinstance(manager, TieringManagerConfig)  # tier_config builds a tiering manager
        self.identity: BlockIdentity = vllm_identity(offloading_spec.config, config, int(host.shape[1]))
        self._tier: SecondaryTier = build_tier(manager.secondary[0], config, host, identity=self.identity)
        self._info: ConfigInfoMapping = KVContractTierInfo.describe(manager.secondary[0], config).as_config_info()
        self._refused: list[JobResult] = []
        self._running: set[int] = set()
        self._done: list[JobResult] = []

    @property
    def tier(self) -> SecondaryTier:
        """The kvcontract tier this adapter drives."""
        return self._tier

    @override
    def lookup(self, key: VLLMOffloadKey, req_context: VLLMReqContext) -> VLLMLookupResult:
        return _RESULTS[self._tier.lookup(OffloadKey(key))]

    def _job(self, job: TransferJob) -> TierJob:
        ids: list[int] = job.chunk_ids.tolist()
        return TierJob(job.job_id, as_contract_keys(job.keys), ids)

    @override
    def submit_store(self, job_metadata: TransferJob) -> None:
        self._submitted(job_metadata.job_id, self._tier.submit_store(self._job(job_metadata)))

    @override
    def submit_load(self, job_metadata: TransferJob) -> None:
        self._submitted(job_metadata.job_id, self._tier.submit_load(self._job(job_metadata)))

    def _submitted(self, job_id: int, started: bool) -> None:
        if started:
            self._running.add(job_id)
        else:
            self._refused.append(JobResult(job_id, success=False))

    def _poll(self) -> None:
        for result in self._tier.get_finished():
            self._running.discard(result.job_id)
            self._done.append(
                JobResult(
                    result.job_id,
                    result.success,
                    transfer_time=result.transfer_seconds,
                    transfer_bytes=result.transfer_bytes,
                )
            )

    @override
    def get_finished_jobs(self) -> list[JobResult]:
        self._poll()
        finished = self._refused + self._done
        self._refused, self._done = [], []
        return finished

    @override
    def has_pending_work(self) -> bool:
        return bool(self._running or self._refused or self._done)

    @override
    def drain_jobs(self) -> None:
        self._poll()
        while self._running:
            time.sleep(_DRAIN_PAUSE_SECONDS)
            self._poll()

    @override
    def take_events(self) -> list[VLLMOffloadingEvent]:
        return as_vllm_events(self._tier.take_events(), ownership=self.tier_type)

    @override
    def on_new_request(self, req_context: VLLMReqContext) -> RequestOffloadingContext:
        return RequestOffloadingContext()

    @classmethod
    @override
    def config_info_keys(cls, tier_config: dict[str, Any]) -> tuple[str, ...]:
        return KVContractTierInfo.config_info_keys()

    @override
    def config_info(self) -> ConfigInfoMapping:
        return self._info

    @override
    def shutdown(self) -> None:
        self._tier.shutdown()
