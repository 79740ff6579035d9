"""``KVContractHiCacheStorage``: a kvcontract tier as SGLang's HiCache storage layer (``interface_v1``).

SGLang's prefetch, backup and I/O threads call the backend synchronously: ``batch_exists``
(hits from the first key up to the first miss), then ``batch_get_v1`` / ``batch_set_v1`` with
up to 128 pages and their token indices in the host pool. Each page becomes one tier job (a
key per region of the page, see :mod:`.page_table`), so every page gets its own answer.

Host pages are SGLang's only while a call runs: once it returns, SGLang may free a page or
fill it with another request's KV. The tier contract cannot take a submitted job's access to
host memory back, so the two paths differ in what they do with a job that has not reported
within ``timeout_seconds``:

- the copying path (staging rows the backend owns) answers such a page with a miss or a failed
  set at the timeout; the lost job keeps its staging row until it reports, and no call starts
  a job until then, so a hung tier costs SGLang misses, never a longer wait or a wrong byte;
- the zero-copy path (the tier reads and writes SGLang's own pages) keeps waiting for a late
  job, however long the tier takes (kvcontract's tiers bound their jobs themselves: Redis by
  its socket timeouts, Mooncake by its ``timeout``, the file tier by the disk), because
  returning would hand SGLang a page the tier may still write, or let the tier store bytes
  SGLang has since changed. It then takes the copying path, through a few pages of SGLang's
  host pool it reserved at start (``staging_pages``, 16 unless set), until ``RECOVERY_CALLS``
  calls in a row had every job on time and no lost job is out; then it goes back to zero copy.

SGLang's older calls (``get``, ``set``, ``batch_get``, ``batch_set``, ``exists``) move whole
flat pages through one page of the host pool the backend keeps for them, so they use the same
tier jobs. Hybrid models' ``*_v2`` calls are refused at attach with one line.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from typing_extensions import override

from kvcontract.assembly import build_tier
from kvcontract.config import ConfigError
from kvcontract.contracts import BlockIdentity, LookupResult, OffloadKey, SecondaryTier, TierJob, make_offload_key
from kvcontract.integrations.sglang.hicache_api import (
    HiCacheStorage,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolTransfer,
    PoolTransferResult,
    new_storage_metrics,
)
from kvcontract.integrations.sglang.identity import PoolGeometry, sglang_identity
from kvcontract.integrations.sglang.options import (
    DEFAULT_POOL_STAGING_PAGES,
    DEFAULT_STAGING_PAGES,
    SOURCE,
    BackendOptions,
    backend_options,
    check_keys,
)
from kvcontract.integrations.sglang.page_table import HostPool, PageTable, StagingRows, page_table
from kvcontract.managers import TierStats
from kvcontract.metrics import MetricSample, tier_samples
from kvcontract.tiers import FileTier, MooncakeTier, RedisTier

if TYPE_CHECKING:
    from kvcontract.integrations.sglang.hicache_api import StorageMetrics

__all__ = ["RECOVERY_CALLS", "KVContractHiCacheStorage"]

_log = logging.getLogger(__name__)
_POLL_SECONDS = 0.0002
"""Pause between polls of the tier while a call waits: well below a page's file I/O."""
_KV_POOL = "kv"
"""SGLang's name of the full-attention KV pool (``PoolName.KV``): the one pool the backend serves."""
_COUNTERS = (
    "hits",
    "promoted",
    "written",
    "bytes_read",
    "bytes_written",
    "failed_jobs",
    "lookups",
    "promotion_failures",
    "cascade_failures",
)
"""The tier counters of :class:`kvcontract.managers.TierStats` the backend keeps itself."""
RECOVERY_CALLS = 8
"""Copying-path calls in a row with every job on time (and no lost job out) after which a zero-copy backend copies no more."""
_V2_REFUSAL = (
    "kvcontract's HiCache backend serves full-attention KV pages (interface_v1) only; this model's "
    "hybrid pools (sliding window, Mamba, draft or sidecar pools: the *_v2 calls) are not supported: "
    "use an SGLang storage backend with v2 support for it"
)


class KVContractHiCacheStorage(HiCacheStorage):
    """SGLang's HiCache storage, backed by the kvcontract tier the extra config's ``kvcontract`` section names.

    SGLang builds it as ``cls(storage_config, kwargs)`` and hands it the host pool with
    ``register_mem_pool_host``; the tier, the page table and the block identity are built
    then, so a tier that already holds this identity's pages serves them at the first call.
    """

    def __init__(self, storage_config: HiCacheStorageConfig, kwargs: Mapping[str, object] | None = None) -> None:
        self._config = storage_config
        check_keys(storage_config.extra_config)  # refused before SGLang goes on; sizes need the pool's page bytes
        self._lock = threading.Lock()
        self._job_ids = itertools.count()
        self._results: dict[int, bool] = {}
        self._lost: dict[
            int, list[int]
        ] = {}  # copying path only: each lost job and the staging slot it holds until it reports
        self._counts = dict.fromkeys(_COUNTERS, 0)
        self._interval = new_storage_metrics()
        self._scratch_lock = threading.Lock()
        self._pool: Any = None
        self._table: PageTable | None = None
        self._staging: StagingRows | None = None
        self._tier: SecondaryTier | None = None
        self._options: BackendOptions | None = None
        self._identity: BlockIdentity | None = None
        self._scratch: int | None = None
        self._scratch_indices: torch.Tensor | None = None
        self._copying = False
        self._on_time = 0
        self._late_jobs = 0
        self._staging_indices: torch.Tensor | None = None
        self._closed = False

    @override
    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        if self._tier is not None or self._closed:
            # A second pool would leave the first tier running and its pages reserved (68 host pages).
            raise RuntimeError(
                "KVContractHiCacheStorage: register_mem_pool_host was called again; one backend serves one host "
                "pool for its life: close() it and build a new backend for another pool"
            )
        super().register_mem_pool_host(mem_pool_host)
        pool: HostPool = mem_pool_host
        page_num = int(mem_pool_host.size) // pool.page_size
        probe = page_table(pool, page_num, staging_pages=1)
        self._options = options = backend_options(self._config.extra_config, probe.row_bytes, probe.regions)
        table = (
            probe if not probe.staged else page_table(pool, page_num, options.staging_pages or DEFAULT_STAGING_PAGES)
        )
        geometry = PoolGeometry(
            layout=pool.layout,
            dtype=str(pool.dtype).removeprefix("torch."),
            layers=int(mem_pool_host.layer_num),
            heads=int(getattr(mem_pool_host, "head_num", 1)),
            head_dim=int(getattr(mem_pool_host, "head_dim", 0) or getattr(mem_pool_host, "kv_cache_dim", 0)),
            page_size=pool.page_size,
            regions=table.regions,
        )
        self._identity = sglang_identity(self._config, geometry, options.config.identity, table.row_bytes)
        self._tier = build_tier(options.tier, options.config, table.rows, identity=self._identity)
        self._pool, self._table = mem_pool_host, table
        if table.staged:
            self._staging = StagingRows([[row] for row in range(int(table.rows.shape[0]))])
        else:
            self._staging = self._reserve_staging(table, options.staging_pages or DEFAULT_POOL_STAGING_PAGES)
            if not options.zero_copy and self._staging is None:
                raise ConfigError(
                    SOURCE,
                    ["kvcontract.zero_copy: false needs staging pages, and SGLang's host pool has none to spare"],
                )
            self._copying = not options.zero_copy
        scratch: torch.Tensor | None = mem_pool_host.alloc(pool.page_size)
        self._scratch_indices = scratch
        self._scratch = None if scratch is None else int(scratch[0]) // pool.page_size
        _log.info(
            "kvcontract HiCache backend: %s on %s, %s path, identity %s",
            type(self._tier).__name__,
            pool.layout,
            "copying" if table.staged else "zero-copy",
            self._identity.fingerprint_hex,
        )

    def _reserve_staging(self, table: PageTable, pages: int) -> StagingRows | None:
        """Up to ``pages`` pages of SGLang's host pool as the copying path's slots on a zero-copy layout (fewer if the pool is small)."""
        size = int(self._pool.page_size)
        while pages:
            indices: torch.Tensor | None = self._pool.alloc(pages * size)
            if indices is not None:
                self._staging_indices = indices
                starts: list[int] = indices[::size].numpy().tolist()
                return StagingRows([table.page_rows(start // size) for start in starts])
            pages //= 2
        return None

    @override
    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        if str(host_pool_name) != _KV_POOL:
            raise ValueError(f"{_V2_REFUSAL} (pool {host_pool_name})")
        super().register_mem_host_pool_v2(host_pool, host_pool_name)

    @property
    def tier(self) -> SecondaryTier:
        """The kvcontract tier serving as storage (after SGLang registered its host pool)."""
        if self._tier is None:
            raise RuntimeError(
                "KVContractHiCacheStorage: SGLang has not registered its host pool yet (register_mem_pool_host)"
            )
        return self._tier

    @property
    def identity(self) -> BlockIdentity:
        """The block identity of this rank's pages."""
        if self._identity is None:
            raise RuntimeError(
                "KVContractHiCacheStorage: SGLang has not registered its host pool yet (register_mem_pool_host)"
            )
        return self._identity

    @property
    def zero_copy(self) -> bool:
        """Whether the tier reads and writes the host pool in place now (page-first layouts, while no job was late)."""
        return self._table is not None and not self._table.staged and not self._copying

    @property
    def late_jobs(self) -> int:
        """Zero-copy jobs that reported after ``timeout_seconds`` (each one made SGLang wait for it, then the backend copy)."""
        with self._lock:
            return self._late_jobs

    def _keys(self, key: str) -> list[OffloadKey]:
        assert self._table is not None  # every caller runs after register_mem_pool_host
        digest = key.encode()
        return [make_offload_key(digest, region) for region in range(self._table.regions)]

    @override
    def batch_exists(self, keys: list[str], extra_info: HiCacheStorageExtraInfo | None = None) -> int:
        # SGLang's keys, checked once here (bytes keys ended in a traceback); its annotation says str, hence type().
        wrong = next((key for key in keys if type(key) is not str), None)
        if wrong is not None:
            raise TypeError(
                f"KVContractHiCacheStorage: keys are SGLang's page hashes as str, got {type(wrong).__name__}"
            )
        if self._fenced() or not keys:
            return 0
        hits = self._leading_hits([part for key in keys for part in self._keys(key)]) // self._regions()
        with self._lock:
            self._counts["lookups"] += min(hits + 1, len(keys))
            self._counts["hits"] += hits
        return hits

    def _leading_hits(self, parts: Sequence[OffloadKey]) -> int:
        """How many of ``parts`` are readable, from the first up to the first that is not.

        A tier that asks its server (Redis) answers ``RETRY`` first: every key up to the first
        certain miss is asked at once, and those still open are asked again until they are
        answered or the timeout passes (then they are misses).
        """
        tier, retry, hit = self.tier, LookupResult.RETRY, LookupResult.HIT
        answers: list[LookupResult] = [retry] * len(parts)
        deadline = time.monotonic() + self._timeout()
        while True:
            for index, part in enumerate(parts):
                if answers[index] is retry:
                    answers[index] = tier.lookup(part)
                if answers[index] is not hit and answers[index] is not retry:
                    break
            first = next((index for index, answer in enumerate(answers) if answer is not hit), len(parts))
            if first == len(parts) or answers[first] is not retry or time.monotonic() >= deadline:
                return first
            time.sleep(_POLL_SECONDS)

    def _regions(self) -> int:
        assert self._table is not None  # every caller runs after register_mem_pool_host
        return self._table.regions

    @override
    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    @override
    def batch_get_v1(
        self, keys: list[str], host_indices: torch.Tensor, extra_info: HiCacheStorageExtraInfo | None = None
    ) -> list[bool]:
        return self._transfer(keys, self._pages(host_indices, len(keys)), store=False)

    @override
    def batch_set_v1(
        self, keys: list[str], host_indices: torch.Tensor, extra_info: HiCacheStorageExtraInfo | None = None
    ) -> list[bool]:
        if not self._config.is_storage_writer:
            return [True] * len(keys)  # MLA: one writer rank stores the page every rank reads
        return self._transfer(keys, self._pages(host_indices, len(keys)), store=True)

    def _pages(self, host_indices: torch.Tensor, count: int) -> list[int]:
        """The host pool's page of each key: SGLang gives ``page_size`` token indices per page, each run starting a page.

        Checked once here, at the boundary: indices that do not start a page, or too few of
        them, are SGLang's mistake, and would otherwise move another page's bytes.
        """
        self.tier  # noqa: B018  # before registration: the one error saying so, not a traceback on a pool of None
        size = int(self._pool.page_size)
        starts: list[int] = host_indices[: count * size : size].numpy().tolist()
        if len(starts) != count or any(start % size for start in starts):
            bad = next((start for start in starts if start % size), None)
            raise ValueError(
                f"KVContractHiCacheStorage: host_indices must hold {size} token indices per key, each key's "
                f"first a page start (a multiple of page_size {size}); got {int(host_indices.numel())} indices for "
                f"{count} keys" + ("" if bad is None else f", one page starting at {bad}")
            )
        return [start // size for start in starts]

    def _transfer(self, keys: Sequence[str], pages: Sequence[int], *, store: bool) -> list[bool]:
        """Move ``keys`` between the tier and host pages ``pages``, one job per page; each page's answer."""
        table = self._table
        if table is None or len(pages) != len(keys) or self._fenced():
            return [False] * len(keys)
        started = time.perf_counter()
        if table.staged or self._copying:
            answers = self._staged(table, keys, pages, store)
        else:
            answers = self._in_place(table, keys, pages, store)
        self._account(answers, table, store, time.perf_counter() - started)
        return answers

    def _in_place(self, table: PageTable, keys: Sequence[str], pages: Sequence[int], store: bool) -> list[bool]:
        """The zero-copy path: the tier moves the pages' own rows; a late job is waited out, then the backend copies."""
        jobs = [TierJob(next(self._job_ids), self._keys(key), table.page_rows(page)) for key, page in zip(keys, pages)]
        submitted = [self._submit(job, store) for job in jobs]
        done, late = self._wait(
            [job for job, ok in zip(jobs, submitted) if ok], time.monotonic() + self._timeout(), lose=False
        )
        if late:
            with self._lock:
                self._copying = self._staging is not None  # with no staging page reserved, zero copy goes on, waiting
                self._on_time = 0
                self._late_jobs += len(late)
            _log.warning(
                "kvcontract HiCache backend: %d zero-copy tier jobs did not report within %.1f s; waiting for them (they "
                "move SGLang's own host pages), then taking the copying path until the tier is on time again",
                len(late),
                self._timeout(),
            )
            done.update(self._wait_out(late))
        return [ok and done.get(job.job_id, False) for job, ok in zip(jobs, submitted)]

    def _staged(self, table: PageTable, keys: Sequence[str], pages: Sequence[int], store: bool) -> list[bool]:
        """The copying path: pages move through staging slots in rounds; a job late at the timeout is lost and keeps its slot."""
        assert self._staging is not None  # the copying path has staging slots
        deadline = time.monotonic() + self._timeout()
        answers: list[bool] = []
        late: list[TierJob] = []
        while len(answers) < len(keys) and not late:
            slots = self._staging.take(len(keys) - len(answers))
            if not slots:
                break  # every slot is lent or held by a lost job: the rest are misses, never a wait for room
            at = len(answers)
            round_pages = pages[at : at + len(slots)]
            if store:
                for page, slot in zip(round_pages, slots):
                    self._copy_in(table, page, slot)
            jobs = [
                TierJob(next(self._job_ids), self._keys(key), slot)
                for key, slot in zip(keys[at : at + len(slots)], slots)
            ]
            submitted = [self._submit(job, store) for job in jobs]
            done, late = self._wait([job for job, ok in zip(jobs, submitted) if ok], deadline, lose=True)
            moved = [ok and done.get(job.job_id, False) for job, ok in zip(jobs, submitted)]
            if not store:
                for page, slot, ok in zip(round_pages, slots, moved):
                    if ok:
                        self._copy_out(table, slot, page)
            lost = {job.job_id for job in late}
            self._staging.give_back([slot for job, slot in zip(jobs, slots) if job.job_id not in lost])
            answers += moved
        if not table.staged:
            self._note_copying_call(on_time=not late)
        return answers + [False] * (len(keys) - len(answers))

    def _copy_in(self, table: PageTable, page: int, slot: list[int]) -> None:
        """Host page ``page`` into staging slot ``slot``, before a store's job starts."""
        if table.staged:
            table.rows[slot[0]].copy_(self._page_bytes(table, page))
        else:
            table.rows[slot] = table.rows[table.page_rows(page)]

    def _copy_out(self, table: PageTable, slot: list[int], page: int) -> None:
        """Staging slot ``slot`` into host page ``page``, after a load's job succeeded within the call."""
        if table.staged:
            self._set_page_bytes(table, page, table.rows[slot[0]])
        else:
            table.rows[table.page_rows(page)] = table.rows[slot]

    def _page_bytes(self, table: PageTable, page: int) -> torch.Tensor:
        """Host page ``page`` of a copying layout as flat bytes (a copy): the split regions, else SGLang's page view."""
        if table.split is not None:
            return table.split.gather(page)
        flat: torch.Tensor = self._pool.get_data_page(page * self._pool.page_size, flat=True)
        return flat.contiguous().view(torch.uint8)

    def _set_page_bytes(self, table: PageTable, page: int, data: torch.Tensor) -> None:
        """Flat bytes ``data`` into host page ``page`` of a copying layout, the way :meth:`_page_bytes` reads it."""
        if table.split is not None:
            table.split.scatter(page, data)
        else:
            self._pool.set_from_flat_data_page(page * self._pool.page_size, data.view(self._pool.dtype))

    def _note_copying_call(self, *, on_time: bool) -> None:
        """Count a zero-copy pool's copying-path call; after ``RECOVERY_CALLS`` on time in a row, none lost, go back to zero copy."""
        with self._lock:
            self._on_time = self._on_time + 1 if on_time else 0
            zero_copy = self._options is not None and self._options.zero_copy
            if self._copying and zero_copy and self._on_time >= RECOVERY_CALLS and not self._lost:
                self._copying = False
                _log.info(
                    "kvcontract HiCache backend: the tier was on time for %d calls; back to the zero-copy path",
                    RECOVERY_CALLS,
                )

    def _submit(self, job: TierJob, store: bool) -> bool:
        try:
            return self.tier.submit_store(job) if store else self.tier.submit_load(job)
        except Exception as error:  # a tier's fault fails the page, never SGLang's thread
            _log.warning("kvcontract HiCache backend: the tier refused job %d: %s", job.job_id, error)
            return False

    def _timeout(self) -> float:
        assert self._options is not None  # set by register_mem_pool_host
        return self._options.timeout_seconds

    def _wait(self, jobs: Sequence[TierJob], deadline: float, *, lose: bool) -> tuple[dict[int, bool], list[TierJob]]:
        """The success of each of ``jobs`` that reports by ``deadline``, and those that did not (made lost jobs if ``lose``)."""
        waiting = {job.job_id: job for job in jobs}
        done: dict[int, bool] = {}
        while True:
            with self._lock:
                self._collect()
                for job_id in list(waiting):
                    if job_id in self._results:
                        done[job_id] = self._results.pop(job_id)
                        del waiting[job_id]
                if not waiting:
                    return done, []
                if time.monotonic() >= deadline:
                    if lose:  # under the lock: a report collected after this finds its job lost and frees its slot
                        for job_id, job in waiting.items():
                            self._lost[job_id] = list(job.host_block_ids)
                        _log.warning(
                            "kvcontract HiCache backend: %d tier jobs did not report within %.1f s; their pages are misses "
                            "and no new job starts until they report",
                            len(waiting),
                            self._timeout(),
                        )
                    return done, list(waiting.values())
            time.sleep(_POLL_SECONDS)

    def _wait_out(self, jobs: Sequence[TierJob]) -> dict[int, bool]:
        """The success of each of ``jobs``, however long the tier takes to report them: they move SGLang's own pages."""
        done: dict[int, bool] = {}
        while jobs:
            more, jobs = self._wait(jobs, time.monotonic() + self._timeout(), lose=False)
            done.update(more)
            if jobs:
                _log.warning("kvcontract HiCache backend: still waiting for %d zero-copy tier jobs", len(jobs))
        return done

    def _collect(self) -> None:
        """Take the tier's finished jobs; a lost job's report frees its staging slot. Lock held."""
        for result in self.tier.get_finished():
            slot = self._lost.pop(result.job_id, None)
            if slot is None:
                self._results[result.job_id] = result.success
            elif self._staging is not None:
                self._staging.give_back([slot])

    def _fenced(self) -> bool:
        """Whether a lost job is still out, or the backend is closed (then no call starts a job, and nothing is a hit)."""
        if self._tier is None or self._closed:
            return True
        with self._lock:
            if self._lost:
                self._collect()
            return bool(self._lost)

    def _account(self, answers: Sequence[bool], table: PageTable, store: bool, seconds: float) -> None:
        moved = sum(answers)
        nbytes = moved * table.row_bytes * table.regions
        failed = len(answers) - moved
        with self._lock:
            if store:
                self._counts["written"] += moved
                self._counts["bytes_written"] += nbytes
                self._counts["cascade_failures"] += failed
                self._interval.backup_pgs.append(moved)
                self._interval.backup_bandwidth.append(nbytes / seconds / 1e9 if seconds > 0 else 0.0)
            else:
                self._counts["promoted"] += moved
                self._counts["bytes_read"] += nbytes
                self._counts["promotion_failures"] += failed
                self._interval.prefetch_pgs.append(moved)
                self._interval.prefetch_bandwidth.append(nbytes / seconds / 1e9 if seconds > 0 else 0.0)
            self._counts["failed_jobs"] += failed

    def _read_page(self, page: int) -> torch.Tensor:
        """Host page ``page`` as flat bytes (a copy): its rows in place, else the copying layout's page bytes."""
        table = self._table
        assert table is not None  # every caller runs after register_mem_pool_host
        if table.staged:
            return self._page_bytes(table, page)
        return table.rows[table.page_rows(page)].reshape(-1)

    def _write_page(self, page: int, data: torch.Tensor) -> None:
        """Flat bytes ``data`` into host page ``page``, the way :meth:`_read_page` reads it."""
        table = self._table
        assert table is not None  # every caller runs after register_mem_pool_host
        if table.staged:
            self._set_page_bytes(table, page, data)
        else:
            table.rows[table.page_rows(page)] = data.view(table.regions, -1)

    def _check_page_sized(self, tensor: torch.Tensor, what: str) -> None:
        """Refuse a tensor of the old calls that is not one page's bytes (SGLang's mistake, checked once here)."""
        table = self._table
        assert table is not None  # every caller runs after register_mem_pool_host (a scratch page exists)
        page_bytes = table.row_bytes * table.regions
        nbytes = tensor.numel() * tensor.element_size()
        if nbytes != page_bytes or not tensor.is_contiguous():
            raise ValueError(
                f"KVContractHiCacheStorage: {what} holds {nbytes} bytes"
                f"{'' if tensor.is_contiguous() else ', not contiguous'}: give one page, {page_bytes} contiguous bytes"
            )

    def _scratch_page(self) -> int | None:
        return self._scratch

    @override
    def get(self, key: str, target_location: Any | None = None, target_sizes: Any | None = None) -> torch.Tensor | None:
        page = self._scratch_page()
        if page is None or target_location is None:
            return None
        target: torch.Tensor = target_location
        self._check_page_sized(target, "get's target_location")
        with self._scratch_lock:
            if not self._transfer([key], [page], store=False)[0]:
                return None
            target.view(-1).copy_(self._read_page(page).view(target.dtype))
        return target

    @override
    def batch_get(
        self, keys: list[str], target_locations: Any | None = None, target_sizes: Any | None = None
    ) -> list[torch.Tensor | None]:
        targets: Sequence[Any] = target_locations if target_locations is not None else [None] * len(keys)
        return [self.get(key, target) for key, target in zip(keys, targets)]

    @override
    def set(
        self, key: str, value: Any | None = None, target_location: Any | None = None, target_sizes: Any | None = None
    ) -> bool:
        page = self._scratch_page()
        if page is None or value is None:
            return False
        if not self._config.is_storage_writer:
            return True
        data: torch.Tensor = value
        self._check_page_sized(data, "set's value")
        with self._scratch_lock:
            self._write_page(page, data.reshape(-1).view(torch.uint8))
            return self._transfer([key], [page], store=True)[0]

    @override
    def batch_set(
        self,
        keys: list[str],
        values: Any | None = None,
        target_locations: Any | None = None,
        target_sizes: Any | None = None,
    ) -> bool:
        given: Sequence[Any] = values if values is not None else [None] * len(keys)
        return all(self.set(key, value) for key, value in zip(keys, given))

    @override
    def batch_exists_v2(
        self,
        keys: list[str],
        pool_transfers: list[PoolTransfer] | None = None,
        extra_info: HiCacheStorageExtraInfo | None = None,
    ) -> PoolTransferResult:
        raise NotImplementedError(_V2_REFUSAL)

    @override
    def batch_get_v2(
        self, transfers: list[PoolTransfer], extra_info: HiCacheStorageExtraInfo | None = None
    ) -> dict[str, list[bool]]:
        raise NotImplementedError(_V2_REFUSAL)

    @override
    def batch_set_v2(
        self, transfers: list[PoolTransfer], extra_info: HiCacheStorageExtraInfo | None = None
    ) -> dict[str, list[bool]]:
        raise NotImplementedError(_V2_REFUSAL)

    @override
    def get_stats(self) -> StorageMetrics:
        """SGLang's storage metrics since its last call: pages and bandwidth (GB/s) per prefetch and backup call."""
        with self._lock:
            interval, self._interval = self._interval, new_storage_metrics()
        return interval

    def tier_stats(self) -> TierStats:
        """The backend's counters in kvcontract's tier terms, with the tier's own checksum and identity counts."""
        with self._lock:
            counts = dict(self._counts)
        tier = self._tier
        checksum_failures = identity_mismatches = 0
        if isinstance(tier, (FileTier, RedisTier, MooncakeTier)):
            checks = tier.stats()
            checksum_failures, identity_mismatches = checks.checksum_failures, checks.identity_mismatches
        return TierStats(
            "sglang",
            **counts,
            checksum_failures=checksum_failures,
            identity_mismatches=identity_mismatches,
            reachable=not isinstance(tier, (RedisTier, MooncakeTier)) or tier.healthy,
        )

    def metrics_source(self) -> Iterator[MetricSample]:
        """kvcontract's metrics of this backend, for :meth:`kvcontract.metrics.MetricsCollector.add` (``tier=sglang``)."""
        return iter(tier_samples(self.tier_stats(), "sglang"))

    def close(self) -> None:
        """SGLang's detach: finish the tier's jobs, release it, and give the old calls' page back to the pool."""
        self._closed = True
        if self._tier is not None:
            self._tier.shutdown()
        with self._lock:
            self._lost.clear()  # the tier's shutdown finished every job
            if self._staging_indices is not None:
                self._pool.free(self._staging_indices)
                self._staging_indices = None
        if self._scratch_indices is not None:
            self._pool.free(self._scratch_indices)
            self._scratch_indices = None
