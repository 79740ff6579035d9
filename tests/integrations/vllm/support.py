"""Shared helpers of the vLLM integration tests: vLLM configs built in the test, and an engine loop.

No model is downloaded: vLLM's ``ModelConfig`` reads a tiny Llama ``config.json`` written
here. :class:`Engine` is vLLM's real scheduler (``Scheduler`` with its
``OffloadingConnector``) and a real worker-side ``OffloadingConnector`` over CPU tensors
shaped as vLLM's canonical KV caches; only the model forward pass is absent, so each step
"samples" a fixed token. Imported only when vLLM is installed (see conftest.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from vllm import SamplingParams
from vllm.config import (
    CacheConfig,
    DeviceConfig,
    KVEventsConfig,
    KVTransferConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole
from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import (
    OffloadingConnectorMetadata,
    OffloadingWorkerMetadata,
    TransferJob,
)
from vllm.distributed.kv_transfer.kv_connector.v1.offloading.worker import OffloadingConnectorWorker
from vllm.distributed.kv_transfer.kv_connector.v1.offloading_connector import OffloadingConnector
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.engine import FinishReason
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheTensor,
    compute_layer_kv_cache_shape_bytes,
)
from vllm.v1.kv_offload.base import GPULoadStoreSpec as VLLMGPULoadStoreSpec
from vllm.v1.kv_offload.base import LoadStoreSpec as VLLMLoadStoreSpec
from vllm.v1.kv_offload.base import OffloadingManager as VLLMOffloadingManager
from vllm.v1.kv_offload.config import (
    OffloadingCacheConfig,
    OffloadingConfig,
    OffloadingGroupConfig,
    OffloadingModelConfig,
    OffloadingParallelConfig,
)
from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput
from vllm.v1.request import Request
from vllm.v1.structured_output import StructuredOutputManager

from kvcontract.contracts import BlockIdsSpec
from kvcontract.integrations.vllm import KVContractHostSpec, KVContractOffloadingWorker

BLOCK_TOKENS = 16
LAYERS = ("layer.0", "layer.1")
KV_SPEC = FullAttentionSpec(block_size=BLOCK_TOKENS, num_kv_heads=2, head_size=16, dtype=torch.float16)
PAGE_BYTES: int = KV_SPEC.page_size_bytes
"""Bytes of one GPU block of one layer (K and V)."""
SPEC_PATH = {"spec_name": "KVContractOffloadingSpec", "spec_module_path": "kvcontract.integrations.vllm"}
_TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_hidden_layers": len(LAYERS),
    "vocab_size": 256,
    "max_position_embeddings": 4096,
    "torch_dtype": "float16",
    "rms_norm_eps": 1e-5,
}
_JOB_WAIT_S = 10.0
VLLM_0_34: bool = hasattr(OffloadingConnectorWorker, "take_failed_recving")
"""Whether the installed vLLM is 0.34 (failed jobs travel back, the worker gets device pointers)."""


def model_dir(root: Path) -> Path:
    """A directory holding the tiny Llama config vLLM's ModelConfig reads; nothing is downloaded."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(_TINY_LLAMA))
    return root


def kv_cache_config(num_blocks: int) -> KVCacheConfig:
    """One full-attention group over both layers, each layer's pages contiguous (layer-outermost)."""
    return KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[
            KVCacheTensor(
                size=PAGE_BYTES * num_blocks * len(LAYERS),
                layers=list(LAYERS),
                layer_stride=PAGE_BYTES * num_blocks,
                block_stride=PAGE_BYTES,
            )
        ],
        kv_cache_groups=[KVCacheGroupSpec(list(LAYERS), KV_SPEC)],
    )


def vllm_config(
    model: Path,
    extra_config: Mapping[str, object],
    *,
    num_blocks: int,
    events: bool = False,
    load_failure_policy: Literal["recompute", "fail"] = "fail",
) -> VllmConfig:
    """A CPU ``VllmConfig`` with prefix caching and vLLM's OffloadingConnector configured by ``extra_config``
    (``load_failure_policy``: vLLM's ``kv_load_failure_policy``, its default ``fail``)."""
    config = VllmConfig(
        model_config=ModelConfig(model=str(model), skip_tokenizer_init=True, dtype="float16", max_model_len=4096),
        device_config=DeviceConfig(device="cpu"),
        scheduler_config=SchedulerConfig(
            max_num_batched_tokens=4096, max_num_seqs=8, max_model_len=4096, is_encoder_decoder=False
        ),
        cache_config=CacheConfig(block_size=BLOCK_TOKENS, enable_prefix_caching=True),
        kv_transfer_config=KVTransferConfig(
            kv_connector="OffloadingConnector",
            kv_role="kv_both",
            kv_connector_extra_config=dict(extra_config),
            kv_load_failure_policy=load_failure_policy,
        ),
        kv_events_config=KVEventsConfig(enable_kv_cache_events=True) if events else None,
    )
    config.cache_config.num_gpu_blocks = num_blocks
    return config


def offloading_config(
    extra_config: Mapping[str, Any], *, blocks_per_chunk: int = 1, events: bool = False
) -> OffloadingConfig:
    """vLLM's offloading config as its connector derives it for :func:`kv_cache_config` on one worker."""
    return OffloadingConfig(
        groups=(OffloadingGroupConfig(tokens_per_block=BLOCK_TOKENS, layer_names=LAYERS, group_id=0),),
        worker_kv_bytes_per_block=PAGE_BYTES * len(LAYERS),
        enable_kv_cache_events=events,
        extra_config=extra_config,
        engine_id="test-engine",
        model=OffloadingModelConfig(name="tiny-llama", dtype="float16"),
        cache=OffloadingCacheConfig(tokens_per_hash=BLOCK_TOKENS, blocks_per_chunk=blocks_per_chunk),
        parallel=OffloadingParallelConfig(
            rank=0,
            world_size=1,
            tp_size=1,
            pp_size=1,
            pcp_size=1,
            dcp_size=1,
            data_parallel_index=0,
            data_parallel_size=1,
            data_parallel_rank_local=None,
            is_parallelism_agnostic=True,
        ),
    )


def kv_caches(num_blocks: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Per layer, vLLM's canonical KV-cache shape (blocks, heads, states, bytes) over one backing allocation."""
    shape = compute_layer_kv_cache_shape_bytes(KV_SPEC, num_blocks)
    generator = torch.Generator().manual_seed(seed)
    backing = torch.randint(0, 256, (PAGE_BYTES * num_blocks * len(LAYERS),), dtype=torch.uint8, generator=generator)
    size = PAGE_BYTES * num_blocks
    return {name: backing[i * size : (i + 1) * size].view(shape) for i, name in enumerate(LAYERS)}


@dataclass
class StepLog:
    """What the scheduler's connector asked for in one engine step."""

    stored_gpu_blocks: list[int] = field(default_factory=list[int])
    loaded_gpu_blocks: list[int] = field(default_factory=list[int])


@dataclass
class RunLog:
    """One request served: the GPU blocks stored and loaded, step by step."""

    request_id: str
    steps: list[StepLog]

    @property
    def hit_tokens(self) -> int:
        """Tokens loaded from the offload cache."""
        return len(self.loaded) * BLOCK_TOKENS

    @property
    def stored(self) -> list[int]:
        """GPU block ids stored, in order."""
        return [block for step in self.steps for block in step.stored_gpu_blocks]

    @property
    def loaded(self) -> list[int]:
        """GPU block ids loaded, in order."""
        return [block for step in self.steps for block in step.loaded_gpu_blocks]


class Engine:
    """vLLM's scheduler and, with ``with_worker``, a worker-side connector over CPU KV caches.

    Without a worker (vLLM's own CPU worker needs CUDA), each transfer job is reported
    done as the worker would report it, through vLLM's own ``OffloadingWorkerMetadata``.
    """

    def __init__(self, config: VllmConfig, num_blocks: int, *, with_worker: bool) -> None:
        kv_config = kv_cache_config(num_blocks)
        self.scheduler = Scheduler(config, kv_config, StructuredOutputManager(config), block_size=BLOCK_TOKENS)
        connector = self.scheduler.connector
        assert isinstance(connector, OffloadingConnector)
        self.connector: OffloadingConnector = connector
        self.worker: OffloadingConnector | None = None
        self.caches: dict[str, torch.Tensor] = {}
        if with_worker:
            self.worker = OffloadingConnector(config, KVConnectorRole.WORKER, kv_config)
            self.caches = kv_caches(num_blocks)
            self.worker.register_kv_caches(self.caches)
        self.finish_reasons: dict[str, FinishReason] = {}
        """Why each request ended (``LENGTH`` when it ran to its last token, ``ERROR`` when vLLM failed it)."""
        init_none_hash(sha256)
        self._hasher = get_request_block_hasher(BLOCK_TOKENS, sha256)

    @property
    def manager(self) -> VLLMOffloadingManager:
        """The offloading manager vLLM's scheduler-side connector drives."""
        return self.connector.scheduler.manager

    def run(self, request_id: str, prompt: list[int], *, output_tokens: int = 2) -> RunLog:
        """Serve one request to its end, then one more step so its last stores are submitted and done.

        Like vLLM's engine loop, it keeps stepping while the scheduler ``has_requests()``,
        which includes the connector's pending work (tier jobs of the manager still in flight).
        """
        self.scheduler.add_request(self.request(request_id, prompt, output_tokens=output_tokens))
        steps: list[StepLog] = []
        while self.scheduler.has_requests() or any(step.stored_gpu_blocks for step in steps[-1:]):
            steps.append(self._step())
        return RunLog(request_id, steps)

    def request(self, request_id: str, prompt: list[int], *, output_tokens: int = 2) -> Request:
        """vLLM's request for ``prompt``, its block hashes made by the engine's hasher."""
        return Request(
            request_id=request_id,
            prompt_token_ids=prompt,
            sampling_params=SamplingParams(max_tokens=output_tokens, ignore_eos=True),
            pooling_params=None,
            block_hasher=self._hasher,
        )

    def drop_gpu_prefix_cache(self) -> None:
        """Forget the GPU prefix cache (not the offloaded blocks), so the next request must load."""
        assert self.scheduler.reset_prefix_cache()

    def _step(self) -> StepLog:
        output = self.scheduler.schedule()
        meta = output.kv_connector_metadata
        assert isinstance(meta, OffloadingConnectorMetadata)
        log = StepLog(
            [block for job in meta.store_jobs.values() for block in _gpu_blocks(job.src_spec)],
            [block for job in meta.load_jobs.values() for block in _gpu_blocks(job.dst_spec)],
        )
        jobs = set(meta.store_jobs) | set(meta.load_jobs)
        if self.worker is None:
            loads = meta.load_jobs.values()  # vLLM 0.32's jobs do not say whether they are synchronous
            connector_output = _all_done(jobs, {job.req_id for job in loads if not getattr(job, "sync", False)})
        else:
            connector_output = self._worker_step(meta, jobs, output.finished_req_ids)
        running = [request.request_id for request in self.scheduler.running]
        outputs = self.scheduler.update_from_output(output, runner_output(running, connector_output))
        for client in outputs.values():
            for finished_request in client.outputs:
                if finished_request.finish_reason is not None:
                    self.finish_reasons[finished_request.request_id] = finished_request.finish_reason
        return log

    def _worker_step(self, meta: OffloadingConnectorMetadata, jobs: set[int], finished: set[str]) -> KVConnectorOutput:
        """The worker-side connector's calls of one step, as vLLM's model runner makes them."""
        assert self.worker is not None and self.worker.connector_worker is not None
        worker = self.worker.connector_worker
        worker.start_kv_transfers(meta)
        worker.prepare_store_kv(meta)
        # vLLM submits a step's stores at the start of the next step; flush them now, through
        # the same path vLLM uses for jobs_to_flush, so the run's last stores complete too.
        worker.handle_preemptions(OffloadingConnectorMetadata(load_jobs={}, store_jobs={}))
        deadline = time.monotonic() + _JOB_WAIT_S
        recving: set[str] = set()
        failed: set[str] = set()
        done = OffloadingWorkerMetadata()
        while jobs - set(done.completed_jobs) and time.monotonic() < deadline:
            recving |= worker.get_finished(finished)[1]
            if VLLM_0_34:
                failed |= worker.take_failed_recving()
            reported = worker.build_connector_worker_meta()
            if reported is not None:
                done = _merged(done, reported)
            time.sleep(0.001)
        return KVConnectorOutput(finished_recving=recving, failed_recving=failed, kv_connector_worker_meta=done)


def _runner_output_type() -> Callable[..., ModelRunnerOutput]:
    """``ModelRunnerOutput``, called loosely: its fields differ between releases (0.33 requires ``req_id_to_index``)."""
    return ModelRunnerOutput


def runner_output(running: list[str], connector_output: KVConnectorOutput) -> ModelRunnerOutput:
    """What the model runner returns for one step: a fixed token per running request."""
    make = _runner_output_type()
    index = {"req_id_to_index": {request_id: i for i, request_id in enumerate(running)}} if not VLLM_0_34 else {}
    return make(
        req_ids=running, sampled_token_ids=[[7] for _ in running], kv_connector_output=connector_output, **index
    )


def _gpu_blocks(spec: VLLMLoadStoreSpec) -> list[int]:
    assert isinstance(spec, VLLMGPULoadStoreSpec)
    blocks: list[int] = spec.block_ids.tolist()
    return blocks


def _all_done(jobs: set[int], recving: set[str]) -> KVConnectorOutput:
    return KVConnectorOutput(
        finished_recving=recving,
        kv_connector_worker_meta=OffloadingWorkerMetadata(completed_jobs=dict.fromkeys(jobs, 1)),
    )


def _merged(done: OffloadingWorkerMetadata, reported: OffloadingWorkerMetadata) -> OffloadingWorkerMetadata:
    merged = done.aggregate(reported)
    assert isinstance(merged, OffloadingWorkerMetadata)
    return merged


def run_jobs(connector: OffloadingConnector, meta: OffloadingConnectorMetadata) -> dict[int, bool]:
    """One step of the worker-side connector's calls for ``meta``'s jobs, then its next step's, until every job
    is reported: each job's success, as the scheduler reads it from the worker metadata."""
    worker = connector.connector_worker
    assert worker is not None
    worker.start_kv_transfers(meta)
    worker.prepare_store_kv(meta)
    worker.start_kv_transfers(
        OffloadingConnectorMetadata(load_jobs={}, store_jobs={})
    )  # the next step submits the stores
    jobs = set(meta.load_jobs) | set(meta.store_jobs)
    done = OffloadingWorkerMetadata()
    deadline = time.monotonic() + _JOB_WAIT_S
    while jobs - set(done.completed_jobs) and time.monotonic() < deadline:
        worker.get_finished(set())
        reported = worker.build_connector_worker_meta()
        if reported is not None:
            done = _merged(done, reported)
        time.sleep(0.001)
    assert set(done.completed_jobs) == jobs
    failed: set[int] = done.failed_jobs if VLLM_0_34 else set()
    return {job: job not in failed for job in jobs}


def round_trip(model: Path, device: torch.device, *, blocks_per_chunk: int) -> None:
    """Store GPU blocks through vLLM's worker-side connector, load them elsewhere, and compare every byte.

    The jobs go in as vLLM's scheduler sends them (``OffloadingConnectorMetadata``), so on
    vLLM 0.34 the connector resolves them to device pointers itself. With several GPU blocks
    per offload block, also load from the second GPU block of the first offload block on
    (``block_indices``), as vLLM does for an unaligned hit.
    """
    num_blocks = 32
    extra = {**SPEC_PATH, "blocks_per_chunk": blocks_per_chunk, "kvcontract": {"manager": {"capacity": 8}}}
    config = vllm_config(model, extra, num_blocks=num_blocks)
    connector = OffloadingConnector(config, KVConnectorRole.WORKER, kv_cache_config(num_blocks))
    caches = {name: tensor.to(device) for name, tensor in kv_caches(num_blocks).items()}
    connector.register_kv_caches(caches)
    assert connector.connector_worker is not None
    assert isinstance(connector.connector_worker.worker, KVContractOffloadingWorker)
    count = 2 * blocks_per_chunk
    source = list(range(3, 3 + count))
    host = KVContractHostSpec(BlockIdsSpec([5, 2]))
    try:
        stored = OffloadingConnectorMetadata(
            load_jobs={}, store_jobs={1: TransferJob("r", VLLMGPULoadStoreSpec(source, [count], [0]), host)}
        )
        assert run_jobs(connector, stored) == {1: True}
        expected = {name: cache[source].clone() for name, cache in caches.items()}
        for cache in caches.values():
            cache[source] = 0  # scrambled: the load must bring the stored bytes back, not find them
        target = list(range(20, 20 + count))
        loaded = OffloadingConnectorMetadata(
            load_jobs={2: TransferJob("r", host, VLLMGPULoadStoreSpec(target, [count], [0]))}, store_jobs={}
        )
        assert run_jobs(connector, loaded) == {2: True}
        for name, cache in caches.items():
            assert torch.equal(cache[target], expected[name])
        if blocks_per_chunk > 1:
            unaligned = list(range(26, 26 + count - 1))
            partial = OffloadingConnectorMetadata(
                load_jobs={3: TransferJob("r", host, VLLMGPULoadStoreSpec(unaligned, [count - 1], [1]))}, store_jobs={}
            )
            assert run_jobs(connector, partial) == {3: True}
            for name, cache in caches.items():
                assert torch.equal(cache[unaligned], expected[name][1:])
    finally:
        connector.shutdown()
