"""An engine loop that drives a manager and a worker together, and checks every loaded byte.

For each request it does what an inference engine's scheduler and worker do: look up the
longest readable prefix, load it into GPU blocks, "compute" the rest (fill the blocks with
data that identifies them), store the new blocks, and apply completions. Every loaded block
is compared byte for byte with what was stored.

A seed fixes every count of a run: the worker copies on its own threads, concurrently with
the requests that follow, but a store's completion is applied to the manager at one point of
the schedule, when the request two after it begins (it reuses the store's GPU region, so the
engine waits for that store there in any case), never at the moment the worker happens to
report it. The times (``seconds``, ``transfer_gbps``, ``manager_us_per_block``) are
measurements and vary; so may the counts of a tiering config, whose tiers copy and evict on
their own threads.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import torch

from kvcontract.assembly import build_manager, build_worker
from kvcontract.config import KVContractConfig
from kvcontract.contracts import (
    GPULoadStoreSpec,
    LoadStoreSpec,
    OffloadingManager,
    OffloadingWorker,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
    TransferResult,
)
from kvcontract.engine_driver.keys import key_chains
from kvcontract.engine_driver.orders import RequestServer, StorePlan
from kvcontract.managers import TieringStats, TierStats
from kvcontract.metrics import MeteredWorker, MetricsCollector, manager_source
from kvcontract.sim.hit_bound import unbounded_hit_ratio
from kvcontract.sim.observer import RequestObserver, WhatIfSummary

__all__ = [
    "DataMismatch",
    "EngineParts",
    "EngineSimulator",
    "ProgressSample",
    "SimulationReport",
    "build_engine",
    "resolve_device",
]

_RETRY_PAUSE_SECONDS = 0.0002
_SAMPLES = 100
_BLOCK_STEP = 1 << 20
_LAYER_STEP = 1 << 52


class DataMismatch(RuntimeError):
    """A block loaded from offload differs from the block that was stored."""


@dataclass(frozen=True)
class ProgressSample:
    """Cumulative figures after ``requests`` requests, for the progress plot."""

    requests: int
    hit_ratio: float
    transfer_gbps: float


@dataclass(frozen=True)
class SimulationReport:
    """What a simulation run measured."""

    device: str
    requests: int
    blocks: int
    hit_blocks: int
    hit_ratio: float
    tokens_from_offload: int
    bytes_stored: int
    bytes_loaded: int
    transfer_gbps: float
    manager_us_per_block: float
    failed_stores: int
    failed_loads: int
    verified_blocks: int
    seconds: float
    samples: tuple[ProgressSample, ...] = field(repr=False)
    tiers: tuple[TierStats, ...] = ()
    identity: str = ""
    """The fingerprint (hex) of the block identity the engine's tiers keep."""
    identity_mismatches: int = 0
    """Values of another block identity its tiers met (each a miss): 0 unless engines of several models share them."""
    whatif: WhatIfSummary | None = None
    """What other capacities and policies would have reached, when the config's ``observe.whatif`` is on."""
    hit_ratio_bound: float = 0.0
    """The same requests' hit ratio with room for every block from a cold start: no capacity or policy
    passes it, unless a persistent or shared tier held blocks before the run."""
    copy_path: str = ""
    """How the worker copied: ``cpu-threads`` (the compiled loop), ``cpu-threads-python-loop``, ``cuda-memcpy``, ..."""

    def summary(self) -> dict[str, object]:
        """The figures as a JSON-ready mapping, without the progress samples."""
        figures = asdict(self)
        del figures["samples"]
        return figures


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when present, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@dataclass(frozen=True)
class EngineParts:
    """One simulated engine's components, finished (built, wrapped, metered) before the simulator holds them.

    ``kv_caches`` are the per-layer GPU caches of two request regions; ``worker`` copies between
    them and the host buffer the ``manager`` allocates in. A wrapper of the worker goes in here,
    with :func:`dataclasses.replace`, never onto a simulator that already copies through it.
    """

    device: torch.device
    kv_caches: Sequence[torch.Tensor]
    worker: OffloadingWorker
    manager: OffloadingManager
    copy_path: str = ""
    """How the worker copies (``cpu-threads``: the compiled loop, ``cpu-threads-python-loop``, ``cuda-memcpy``, ...)."""


def build_engine(
    config: KVContractConfig, max_blocks_per_request: int, *, metrics: MetricsCollector | None = None
) -> EngineParts:
    """``config``'s KV cache for requests of up to ``max_blocks_per_request`` blocks, its worker and its
    manager on the worker's host buffer; with ``metrics``, the worker metered and both reporting to it."""
    device = resolve_device(config.transfer.device)
    layout = config.kv_layout
    region_blocks = max(1, max_blocks_per_request) * layout.blocks_per_offload_block
    shape: tuple[int, ...] = (2 * region_blocks, 2, layout.block_tokens, layout.num_kv_heads, layout.head_dim)
    layers = layout.num_layers
    if layout.groups is not None:  # a key per block and group, each a page of the largest group's bytes
        region_blocks *= len(layout.groups)
        shape, layers = (2 * region_blocks, layout.gpu_block_bytes // layout.dtype_bytes), 1
    dtype = getattr(torch, layout.dtype)
    kv_caches = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
    torch_worker = build_worker(config, kv_caches)
    manager = build_manager(config, host_blocks=torch_worker.host_buffer)
    if metrics is None:
        return EngineParts(device, kv_caches, torch_worker, manager, torch_worker.copy_path)
    metered = MeteredWorker(torch_worker)
    metrics.add(manager_source(manager, policy=config.primary.policy.kind))
    metrics.add(metered.source)
    return EngineParts(device, kv_caches, metered, manager, torch_worker.copy_path)


@dataclass
class _Totals:
    blocks: int = 0
    hit_blocks: int = 0
    bytes_stored: int = 0
    bytes_loaded: int = 0
    transfer_seconds: float = 0.0
    manager_seconds: float = 0.0
    failed_stores: int = 0
    failed_loads: int = 0
    verified_blocks: int = 0


@dataclass(frozen=True, slots=True)
class _Request:
    """The request being served, as the data path needs it: its ids, key positions and GPU region."""

    hash_ids: Sequence[int]
    positions: dict[OffloadKey, int]
    region: int
    base: int


class EngineSimulator:
    """A KV cache on a device, a manager and a worker (:class:`EngineParts`), driven per request.

    Requests are served through :class:`kvcontract.engine_driver.orders.RequestServer` in kvcontract's
    order, the one every replay uses; the simulator's :class:`_Copies` is the driver's data
    path (the worker's copies, their checks, and each store's completion at its point of the
    schedule).
    """

    def __init__(
        self, config: KVContractConfig, parts: EngineParts, *, observer: RequestObserver | None = None
    ) -> None:
        self._config = config
        self._observer = observer
        self.device: torch.device = parts.device
        self.worker: OffloadingWorker = parts.worker
        """The worker every copy of the run goes through."""
        self.manager: OffloadingManager = parts.manager
        self._copy_path = parts.copy_path
        self._totals = _Totals()
        self._copies = _Copies(config, parts, self._totals)
        self._server = RequestServer(
            self.manager,
            step_end=self.manager.take_events,
            observe=None if observer is None else observer.observe,
            data_path=self._copies,
        )

    def run(
        self,
        requests: Sequence[Sequence[int]],
        on_request: Callable[[int], None] | None = None,
    ) -> SimulationReport:
        """Serve ``requests`` (each a list of prefix block hash ids) in order; verify every load. With
        ``kv_layout.groups``, each request's keys are those its groups keep (``KVLayout.grouped_requests``)."""
        requests = self._config.kv_layout.grouped_requests(requests)
        started = time.perf_counter()
        every = max(1, len(requests) // _SAMPLES)
        samples: list[ProgressSample] = []
        for index, (hash_ids, keys) in enumerate(zip(requests, key_chains(requests))):
            self._serve(index, hash_ids, keys)
            if on_request is not None:
                on_request(index + 1)
            if (index + 1) % every == 0 or index + 1 == len(requests):
                samples.append(self._sample(index + 1))
        self._copies.settle_all()
        self.manager.shutdown()
        self.worker.shutdown()
        stats = self.manager.stats()
        tiers = stats.tiers if isinstance(stats, TieringStats) else ()
        return self._report(requests, time.perf_counter() - started, samples, tiers)

    def _serve(self, index: int, hash_ids: Sequence[int], keys: Sequence[OffloadKey]) -> None:
        copies = self._copies
        copies.begin(index, hash_ids, keys)
        started = time.perf_counter()
        served = self._server.serve(keys, ReqContext(f"request-{index}"))
        self._totals.manager_seconds += time.perf_counter() - started - copies.take_seconds()
        self._totals.blocks += len(keys)
        self._totals.hit_blocks += served.found

    def _sample(self, served: int) -> ProgressSample:
        totals = self._totals
        return ProgressSample(
            requests=served,
            hit_ratio=totals.hit_blocks / totals.blocks if totals.blocks else 0.0,
            transfer_gbps=_gbps(totals.bytes_stored + totals.bytes_loaded, totals.transfer_seconds),
        )

    def _report(
        self,
        requests: Sequence[Sequence[int]],
        seconds: float,
        samples: list[ProgressSample],
        tiers: tuple[TierStats, ...],
    ) -> SimulationReport:
        totals = self._totals
        return SimulationReport(
            device=str(self.device),
            requests=len(requests),
            blocks=totals.blocks,
            hit_blocks=totals.hit_blocks,
            hit_ratio=totals.hit_blocks / totals.blocks if totals.blocks else 0.0,
            tokens_from_offload=totals.hit_blocks * self._config.kv_layout.offload_block_tokens,
            bytes_stored=totals.bytes_stored,
            bytes_loaded=totals.bytes_loaded,
            transfer_gbps=_gbps(totals.bytes_stored + totals.bytes_loaded, totals.transfer_seconds),
            manager_us_per_block=totals.manager_seconds / totals.blocks * 1e6 if totals.blocks else 0.0,
            failed_stores=totals.failed_stores,
            failed_loads=totals.failed_loads,
            verified_blocks=totals.verified_blocks,
            seconds=seconds,
            samples=tuple(samples),
            tiers=tiers,
            identity=self._config.block_identity().fingerprint_hex,
            identity_mismatches=sum(tier.identity_mismatches for tier in tiers),
            whatif=self._observer.summary() if self._observer is not None else None,
            hit_ratio_bound=unbounded_hit_ratio(requests),
            copy_path=self._copy_path,
        )


class _Copies:
    """The engine's side of each request, as the driver's data path: the worker's copies and their checks.

    It copies loaded blocks into the GPU cache and compares them with what was stored, fills
    the GPU blocks a request computes, stores them through the worker, and applies each
    store's completion when the request two after it begins (it reuses the store's GPU region,
    so the engine waits for that store there in any case). The time of its calls is kept, so
    the simulator counts only the manager's own time as manager time.
    """

    def __init__(self, config: KVContractConfig, parts: EngineParts, totals: _Totals) -> None:
        self._k = config.kv_layout.blocks_per_offload_block
        self._region_blocks = parts.kv_caches[0].shape[0] // 2
        self._device = parts.device
        self._words = [cache.view(cache.shape[0], -1).view(torch.int64) for cache in parts.kv_caches]
        self._offsets = torch.arange(self._words[0].shape[1], device=parts.device, dtype=torch.int64)
        self.worker = parts.worker
        self.manager = parts.manager
        self._totals = totals
        self._job_ids = itertools.count(1)
        self._store_jobs: dict[int, tuple[Sequence[OffloadKey], ReqContext]] = {}
        self._reported: dict[int, TransferResult] = {}
        """Stores the worker reported finished whose completion the schedule has not applied yet."""
        self._region_store: dict[int, int] = {}
        self._request = _Request((), {}, 0, 0)
        self._seconds = 0.0

    def begin(self, index: int, hash_ids: Sequence[int], keys: Sequence[OffloadKey]) -> None:
        """Request ``index`` starts: settle the store that used its GPU region, take finished work."""
        region = index % 2
        pending = self._region_store.pop(region, None)
        if pending is not None:
            self._settle(pending)
        self._collect()
        positions = {key: position for position, key in enumerate(keys)}
        self._request = _Request(hash_ids, positions, region, region * self._region_blocks)
        self._seconds = 0.0

    def take_seconds(self) -> float:
        """Seconds spent in the data path's calls since the request began, less the manager calls among them."""
        return self._seconds

    def settle_all(self) -> None:
        """Apply every store still in flight, in job order: the run is over."""
        for job in sorted(self._store_jobs):
            self._settle(job)

    def wait(self) -> None:
        started = time.perf_counter()
        time.sleep(_RETRY_PAUSE_SECONDS)
        self._collect()
        self._seconds += time.perf_counter() - started

    def load(self, keys: Sequence[OffloadKey], spec: object, context: ReqContext) -> None:
        started = time.perf_counter()
        if not isinstance(spec, LoadStoreSpec):
            raise TypeError(f"prepare_load returned a {type(spec).__name__}, not a LoadStoreSpec")
        request = self._request
        base = request.base
        end = base + len(keys) * self._k
        for words in self._words:
            words[base:end] = -1
        job = next(self._job_ids)
        if self.worker.submit_load(job, spec, GPULoadStoreSpec(list(range(base, end)))):
            self.worker.wait([job])
            self._collect()
            self._verify(request.hash_ids[: len(keys)], base)
        else:
            self._totals.failed_loads += 1
        self._seconds += time.perf_counter() - started

    def store(self, plan: StorePlan[OffloadKey], context: ReqContext) -> None:
        started = time.perf_counter()
        if not isinstance(plan, PrepareStoreOutput):
            raise TypeError(f"prepare_store returned a {type(plan).__name__}, not a PrepareStoreOutput")
        request = self._request
        first = min(request.positions[key] for key in plan.keys_to_store)
        self._write(request.hash_ids[first:], request.base + first * self._k)
        gpu_ids = [
            request.base + request.positions[key] * self._k + sub
            for key in plan.keys_to_store
            for sub in range(self._k)
        ]
        job = next(self._job_ids)
        if self.worker.submit_store(job, GPULoadStoreSpec(gpu_ids), plan.store_spec):
            self._store_jobs[job] = (plan.keys_to_store, context)
            self._region_store[request.region] = job
            self._seconds += time.perf_counter() - started
        else:
            self._totals.failed_stores += len(plan.keys_to_store)
            self._seconds += time.perf_counter() - started
            self.manager.complete_store(plan.keys_to_store, context, success=False)

    def _collect(self) -> None:
        """Take what the worker reports finished: loads are counted, stores wait for :meth:`_settle`."""
        for result in self.worker.get_finished():
            self._totals.transfer_seconds += result.transfer_seconds
            if result.job_id in self._store_jobs:
                self._reported[result.job_id] = result
            elif result.success:
                self._totals.bytes_loaded += result.transfer_bytes
            else:
                self._totals.failed_loads += 1

    def _settle(self, job: int) -> None:
        """Apply store ``job``'s completion to the manager, waiting for the worker to finish it first."""
        if job not in self._reported:
            self.worker.wait([job])
            self._collect()
        result = self._reported.pop(job, None)
        if result is None:
            raise RuntimeError(f"the worker did not report store job {job} finished after waiting for it")
        keys, ctx = self._store_jobs.pop(job)
        if result.success:
            self._totals.bytes_stored += result.transfer_bytes
        else:
            self._totals.failed_stores += len(keys)
        started = time.perf_counter()
        self.manager.complete_store(keys, ctx, success=result.success)
        self._totals.manager_seconds += time.perf_counter() - started

    def _pattern(self, hash_ids: Sequence[int]) -> torch.Tensor:
        """Words of the GPU blocks of ``hash_ids`` in layer 0; layer ``l`` adds ``l * _LAYER_STEP``."""
        # ids of 2**63 and more (a trace's ids are unsigned 64-bit) as the int64 of the same bits
        signed = [h - (1 << 64) if h >> 63 else h for h in hash_ids]
        ids = torch.tensor(signed, dtype=torch.int64, device=self._device)
        subs = torch.arange(self._k, dtype=torch.int64, device=self._device)
        values = (ids[:, None] * self._k + subs[None, :]).reshape(-1, 1)
        return values * _BLOCK_STEP + self._offsets[None, :]

    def _write(self, hash_ids: Sequence[int], first_gpu_block: int) -> None:
        if not hash_ids:
            return
        pattern = self._pattern(hash_ids)
        end = first_gpu_block + pattern.shape[0]
        for layer, words in enumerate(self._words):
            torch.add(pattern, layer * _LAYER_STEP, out=words[first_gpu_block:end])

    def _verify(self, hash_ids: Sequence[int], first_gpu_block: int) -> None:
        pattern = self._pattern(hash_ids)
        end = first_gpu_block + pattern.shape[0]
        for layer, words in enumerate(self._words):
            if layer:
                pattern += _LAYER_STEP
            if not torch.equal(words[first_gpu_block:end], pattern):
                raise DataMismatch(
                    f"layer {layer}: a block loaded for hash ids {list(hash_ids)[:8]}... "
                    "differs from the block that was stored"
                )
        self._totals.verified_blocks += len(hash_ids)


def _gbps(transferred: int, seconds: float) -> float:
    return transferred / seconds / 1e9 if seconds > 0 else 0.0
