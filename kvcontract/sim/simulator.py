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
from typing import TypeVar

import torch

from kvcontract.assembly import build_manager, build_worker
from kvcontract.config import KVContractConfig
from kvcontract.managers import TierStats, TieringStats
from kvcontract.sim.observer import RequestObserver, WhatIfSummary
from kvcontract.contracts import (
    GPULoadStoreSpec,
    LookupResult,
    OffloadingManager,
    OffloadingWorker,
    OffloadKey,
    ReqContext,
    TransferResult,
    make_offload_key,
)

__all__ = ["DataMismatch", "EngineSimulator", "ProgressSample", "SimulationReport", "resolve_device"]

_R = TypeVar("_R")
_RETRY_LIMIT = 2000
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


class EngineSimulator:
    """A KV cache on a device, a manager and a worker built from one config, driven per request."""

    def __init__(
        self, config: KVContractConfig, max_blocks_per_request: int, *, observer: RequestObserver | None = None
    ) -> None:
        layout = config.kv_layout
        self._config = config
        self._observer = observer
        self._k = layout.blocks_per_offload_block
        self._region_blocks = max(1, max_blocks_per_request) * self._k
        self.device: torch.device = resolve_device(config.transfer.device)
        shape = (2 * self._region_blocks, 2, layout.block_tokens, layout.num_kv_heads, layout.head_dim)
        dtype = getattr(torch, layout.dtype)
        self._kv_caches = [
            torch.zeros(shape, dtype=dtype, device=self.device) for _ in range(layout.num_layers)
        ]
        self._words = [cache.view(cache.shape[0], -1).view(torch.int64) for cache in self._kv_caches]
        self._offsets = torch.arange(self._words[0].shape[1], device=self.device, dtype=torch.int64)
        worker = build_worker(config, self._kv_caches)
        self.worker: OffloadingWorker = worker
        self.manager: OffloadingManager = build_manager(config, host_blocks=worker.host_buffer)
        self._job_ids = itertools.count(1)
        self._store_jobs: dict[int, tuple[Sequence[OffloadKey], ReqContext]] = {}
        self._reported: dict[int, TransferResult] = {}
        """Stores the worker reported finished whose completion the schedule has not applied yet."""
        self._region_store: dict[int, int] = {}
        self._totals = _Totals()

    def run(
        self,
        requests: Sequence[Sequence[int]],
        on_request: Callable[[int], None] | None = None,
    ) -> SimulationReport:
        """Serve ``requests`` (each a list of prefix block hash ids) in order; verify every load."""
        started = time.perf_counter()
        every = max(1, len(requests) // _SAMPLES)
        samples: list[ProgressSample] = []
        for index, hash_ids in enumerate(requests):
            self._serve(index, hash_ids)
            if on_request is not None:
                on_request(index + 1)
            if (index + 1) % every == 0 or index + 1 == len(requests):
                samples.append(self._sample(index + 1))
        for job in sorted(self._store_jobs):
            self._settle(job)
        self.manager.shutdown()
        self.worker.shutdown()
        stats = self.manager.stats()
        tiers = stats.tiers if isinstance(stats, TieringStats) else ()
        return self._report(len(requests), time.perf_counter() - started, samples, tiers)

    def _serve(self, index: int, hash_ids: Sequence[int]) -> None:
        region = index % 2
        pending = self._region_store.pop(region, None)
        if pending is not None:
            self._settle(pending)
        self._collect()
        ctx = ReqContext(f"request-{index}")
        keys = [make_offload_key(h.to_bytes(8, "big")) for h in hash_ids]
        if self._observer is not None:
            self._observer.observe(keys)
        base = region * self._region_blocks
        hits = self._readable_prefix(keys, ctx)
        if hits:
            self._load(keys[:hits], hash_ids[:hits], base, ctx)
        self._timed(lambda: self.manager.touch(keys, ctx))
        self._write(hash_ids[hits:], base + hits * self._k)
        self._store(keys, hits, base, ctx, region)
        self._timed(lambda: self.manager.on_request_finished(ctx))
        self._timed(self.manager.take_events)
        self._totals.blocks += len(keys)
        self._totals.hit_blocks += hits

    def _readable_prefix(self, keys: Sequence[OffloadKey], ctx: ReqContext) -> int:
        """Blocks readable from the start of ``keys``, waiting for promotions a tier started.

        Keys are looked up until one is neither readable nor being promoted, so every
        promotion of the prefix starts in the same step; then each ``RETRY`` is asked
        again, in order, until it lands.
        """
        answers: list[LookupResult] = []
        for key in keys:
            answer = self._timed(lambda: self.manager.lookup(key, ctx))
            if answer is not LookupResult.HIT and answer is not LookupResult.RETRY:
                break
            answers.append(answer)
        hits = 0
        for key, answer in zip(keys, answers):
            retries = 0
            while answer is LookupResult.RETRY and retries < _RETRY_LIMIT:
                time.sleep(_RETRY_PAUSE_SECONDS)
                self._collect()
                answer = self._timed(lambda: self.manager.lookup(key, ctx))
                retries += 1
            if answer is not LookupResult.HIT:
                break
            hits += 1
        if LookupResult.RETRY in answers:
            hits = self._still_readable(keys[:hits], ctx)
        return hits

    def _still_readable(self, keys: Sequence[OffloadKey], ctx: ReqContext) -> int:
        """Completions applied while waiting may have evicted part of the prefix: re-check it."""
        for count, key in enumerate(keys):
            if self._timed(lambda: self.manager.lookup(key, ctx)) is not LookupResult.HIT:
                return count
        return len(keys)

    def _load(
        self, keys: Sequence[OffloadKey], hash_ids: Sequence[int], base: int, ctx: ReqContext
    ) -> None:
        spec = self._timed(lambda: self.manager.prepare_load(keys, ctx))
        end = base + len(keys) * self._k
        gpu_ids = list(range(base, end))
        for words in self._words:
            words[base:end] = -1
        job = next(self._job_ids)
        submitted = self.worker.submit_load(job, spec, GPULoadStoreSpec(gpu_ids))
        if submitted:
            self.worker.wait([job])
            self._collect()
            self._verify(hash_ids, base)
        else:
            self._totals.failed_loads += 1
        self._timed(lambda: self.manager.complete_load(keys, ctx))

    def _store(
        self, keys: Sequence[OffloadKey], hits: int, base: int, ctx: ReqContext, region: int
    ) -> None:
        new_keys = keys[hits:]
        if not new_keys:
            return
        plan = self._timed(lambda: self.manager.prepare_store(new_keys, ctx))
        if plan is None or not plan.keys_to_store:
            return
        position = {key: i for i, key in enumerate(keys)}
        gpu_ids = [
            base + position[key] * self._k + sub for key in plan.keys_to_store for sub in range(self._k)
        ]
        job = next(self._job_ids)
        if self.worker.submit_store(job, GPULoadStoreSpec(gpu_ids), plan.store_spec):
            self._store_jobs[job] = (plan.keys_to_store, ctx)
            self._region_store[region] = job
        else:
            self._totals.failed_stores += len(plan.keys_to_store)
            to_fail = plan.keys_to_store
            self._timed(lambda: self.manager.complete_store(to_fail, ctx, success=False))

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
        self._timed(lambda: self.manager.complete_store(keys, ctx, success=result.success))

    def _pattern(self, hash_ids: Sequence[int]) -> torch.Tensor:
        """Words of the GPU blocks of ``hash_ids`` in layer 0; layer ``l`` adds ``l * _LAYER_STEP``."""
        # ids of 2**63 and more (a trace's ids are unsigned 64-bit) as the int64 of the same bits
        signed = [h - (1 << 64) if h >> 63 else h for h in hash_ids]
        ids = torch.tensor(signed, dtype=torch.int64, device=self.device)
        subs = torch.arange(self._k, dtype=torch.int64, device=self.device)
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

    def _timed(self, call: Callable[[], _R]) -> _R:
        started = time.perf_counter()
        try:
            return call()
        finally:
            self._totals.manager_seconds += time.perf_counter() - started

    def _sample(self, served: int) -> ProgressSample:
        totals = self._totals
        return ProgressSample(
            requests=served,
            hit_ratio=totals.hit_blocks / totals.blocks if totals.blocks else 0.0,
            transfer_gbps=_gbps(totals.bytes_stored + totals.bytes_loaded, totals.transfer_seconds),
        )

    def _report(
        self,
        requests: int,
        seconds: float,
        samples: list[ProgressSample],
        tiers: tuple[TierStats, ...],
    ) -> SimulationReport:
        totals = self._totals
        return SimulationReport(
            device=str(self.device),
            requests=requests,
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
        )


def _gbps(transferred: int, seconds: float) -> float:
    return transferred / seconds / 1e9 if seconds > 0 else 0.0
