"""One of SGLang's host pools served by its own kvcontract tier: built whole when SGLang registers the pool.

SGLang registers its full-attention KV pool with ``register_mem_pool_host`` and, on a hybrid
model, every pool beside it (sliding-window KV, Mamba state, the DSA indexer, ...) with
``register_mem_host_pool_v2``. Each pool's pages have their own size and layout, so each gets
its own tier over its own rows (:mod:`.page_table`) and its own block identity (the pool's
name and layout are part of it); a page's keys are SGLang's page hash, a key per region of
the page, in that pool's tier only. Everything a pool needs is built at registration into a
:class:`PoolStore`; the backend holds one per registered pool, or none.

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
  host pool it reserved at start (``staging_pages``, 16 unless set; the KV pool only: a side
  pool's pages may be indexed by the KV pool's allocator), until ``RECOVERY_CALLS`` calls in a
  row had every job on time and no lost job is out; then it goes back to zero copy.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import torch

from kvcontract.assembly import build_tier
from kvcontract.config import ConfigError
from kvcontract.contracts import BlockIdentity, LookupResult, OffloadKey, SecondaryTier, TierJob, make_offload_key
from kvcontract.integrations.sglang.hicache_api import HiCacheStorageConfig
from kvcontract.integrations.sglang.identity import pool_geometry, replicated, sglang_identity
from kvcontract.integrations.sglang.options import (
    DEFAULT_POOL_STAGING_PAGES,
    DEFAULT_STAGING_PAGES,
    SOURCE,
    BackendOptions,
    backend_options,
)
from kvcontract.integrations.sglang.page_table import HostPool, PageTable, StagingRows, page_table
from kvcontract.managers import TierStats

__all__ = ["KV_POOL", "RECOVERY_CALLS", "PoolStore", "attach_pool"]

_log = logging.getLogger(__name__)
_POLL_SECONDS = 0.0002
"""Pause between polls of the tier while a call waits: well below a page's file I/O."""
KV_POOL = "kv"
"""SGLang's name of the full-attention KV pool (``PoolName.KV``), the one ``register_mem_pool_host`` hands over."""
RECOVERY_CALLS = 8
"""Copying-path calls in a row with every job on time (and no lost job out) after which a zero-copy pool copies no more."""


def attach_pool(name: str, host_pool: Any, config: HiCacheStorageConfig) -> PoolStore:
    """The store of SGLang's host pool ``host_pool`` named ``name``: its page table, options, identity and tier.

    A pool whose pages the backend has no view of is refused here, in one line naming it,
    so SGLang's attach fails instead of the pool missing silently at every call.
    """
    pool: HostPool = host_pool
    kv = name == KV_POOL
    page_num = int(host_pool.size) // pool.page_size
    try:
        probe = page_table(pool, page_num, staging_pages=1)
    except (ValueError, NotImplementedError, AttributeError, TypeError) as error:
        if kv:
            raise
        raise ValueError(
            f"kvcontract's HiCache backend cannot store SGLang's {name!r} pool ({type(host_pool).__name__}): {error}"
        ) from error
    if probe.row_bytes == 0:
        raise ValueError(
            f"kvcontract's HiCache backend cannot store SGLang's {name!r} pool ({type(host_pool).__name__}): its pages "
            "hold no bytes (a pool SGLang keeps for indices only); this backend stores pools whose pages hold KV or state"
        )
    options = backend_options(config.extra_config, probe.row_bytes, probe.regions)
    if not (kv or options.zero_copy or probe.staged):
        # A side pool reserves no page of SGLang's: with zero copy off it copies through rows of its own.
        probe = page_table(pool, page_num, staging_pages=1, zero_copy=False)
        options = backend_options(config.extra_config, probe.row_bytes, probe.regions)
    table = probe
    if probe.staged:
        staging_pages = options.staging_pages or DEFAULT_STAGING_PAGES
        table = page_table(pool, page_num, staging_pages, zero_copy=False)  # the probe found no page in place
    geometry = pool_geometry(name, host_pool, table.regions)
    identity = sglang_identity(config, geometry, options.config.identity, table.row_bytes)
    tier = build_tier(options.tier, options.config, table.rows, identity=identity)
    reserved: torch.Tensor | None = None
    if table.staged:
        staging: StagingRows | None = StagingRows([[row] for row in range(int(table.rows.shape[0]))])
    elif kv:
        staging, reserved = _reserve_staging(host_pool, table, options.staging_pages or DEFAULT_POOL_STAGING_PAGES)
        if not options.zero_copy and staging is None:
            tier.shutdown()
            raise ConfigError(
                SOURCE, ["kvcontract.zero_copy: false needs staging pages, and SGLang's host pool has none to spare"]
            )
    else:
        staging = None  # a late zero-copy job of a side pool is waited out
    scratch: torch.Tensor | None = host_pool.alloc(pool.page_size) if kv else None
    store = PoolStore(
        name,
        host_pool,
        table,
        tier,
        identity,
        options,
        staging=staging,
        reserved=reserved,
        scratch=scratch,
        writes=config.is_storage_writer or not replicated(name, config),
    )
    _log.info(
        "kvcontract HiCache backend: pool %s on %s (%s), %s path, identity %s",
        name,
        type(tier).__name__,
        pool.layout,
        "copying" if table.staged else "zero-copy",
        identity.fingerprint_hex,
    )
    return store


def _reserve_staging(host_pool: Any, table: PageTable, pages: int) -> tuple[StagingRows | None, torch.Tensor | None]:
    """Up to ``pages`` pages of SGLang's host pool as the copying path's slots on a zero-copy layout (fewer if the pool is small)."""
    size = int(host_pool.page_size)
    while pages:
        indices: torch.Tensor | None = host_pool.alloc(pages * size)
        if indices is not None:
            starts: list[int] = indices[::size].numpy().tolist()
            return StagingRows([table.page_rows(start // size) for start in starts]), indices
        pages //= 2
    return None, None


class PoolStore:
    """One registered host pool and the tier that keeps its pages: the pool's calls, one tier job per page.

    Built whole by :func:`attach_pool`; ``staging`` is ``None`` only on a zero-copy side pool
    (a late job is then waited out), ``scratch`` (the old calls' page) only where the pool
    had no page to spare or is not the KV pool.
    """

    def __init__(
        self,
        name: str,
        host_pool: Any,
        table: PageTable,
        tier: SecondaryTier,
        identity: BlockIdentity,
        options: BackendOptions,
        *,
        staging: StagingRows | None,
        reserved: torch.Tensor | None,
        scratch: torch.Tensor | None,
        writes: bool,
    ) -> None:
        self.name: str = name
        self.host_pool: Any = host_pool
        """SGLang's host pool (its classes are SGLang's, untyped here)."""
        self.table: PageTable = table
        self._tier = tier
        self.identity: BlockIdentity = identity
        self.options: BackendOptions = options
        self.writes: bool = writes
        """Whether this rank stores the pool's pages (MLA's replicated pages: only SGLang's writer rank)."""
        self._staging = staging
        self._reserved = reserved
        self._scratch = scratch
        self.scratch_page: int | None = None if scratch is None else int(scratch[0]) // int(host_pool.page_size)
        self.scratch_lock: threading.Lock = threading.Lock()
        self._lock = threading.Lock()
        self._job_ids = itertools.count()
        self._results: dict[int, bool] = {}
        self._lost: dict[int, list[int]] = {}  # copying path only: each lost job and the staging slot it holds
        self._copying = not table.staged and not options.zero_copy
        self._on_time = 0
        self._late_jobs = 0
        self._closed = False
        self._stats = TierStats(name)
        self._flat_dtype: torch.dtype = (
            host_pool.get_data_page(0, flat=True).dtype if table.staged and table.split is None else host_pool.dtype
        )
        """The dtype of the flat page SGLang's page copy takes (a Mamba pool's is bytes)."""

    @property
    def tier(self) -> SecondaryTier:
        """The kvcontract tier keeping this pool's pages."""
        return self._tier

    @property
    def page_size(self) -> int:
        """Tokens per page of this pool (1 for a Mamba pool's state slots)."""
        return int(self.host_pool.page_size)

    @property
    def page_bytes(self) -> int:
        """Bytes of one page of this pool: its regions' rows."""
        return self.table.row_bytes * self.table.regions

    @property
    def zero_copy(self) -> bool:
        """Whether the tier reads and writes the host pool in place now."""
        return not self.table.staged and not self._copying

    @property
    def late_jobs(self) -> int:
        """Zero-copy jobs that reported after ``timeout_seconds``."""
        with self._lock:
            return self._late_jobs

    @property
    def reserved(self) -> torch.Tensor | None:
        """The token indices of SGLang's host pool this pool's copying path may write (its reserved staging pages)."""
        return self._reserved

    def stats(self) -> TierStats:
        """This pool's counters (a snapshot)."""
        with self._lock:
            return self._stats

    def _count(self, **more: int) -> None:
        """Add to the counters (lock held)."""
        self._stats = dataclasses.replace(
            self._stats, **{name: getattr(self._stats, name) + value for name, value in more.items()}
        )

    def keys(self, key: str) -> list[OffloadKey]:
        """The tier keys of SGLang's page key ``key``: one per region of the page."""
        digest = key.encode()
        return [make_offload_key(digest, region) for region in range(self.table.regions)]

    def pages(self, host_indices: torch.Tensor, count: int) -> list[int]:
        """The host pool's page of each of ``count`` keys: SGLang gives ``page_size`` token indices per page, each run starting a page.

        Checked once here, at the boundary: indices that do not start a page, or too few of
        them, are SGLang's mistake, and would otherwise move another page's bytes.
        """
        size = self.page_size
        starts: list[int] = host_indices[: count * size : size].numpy().tolist()
        if len(starts) != count or any(start % size for start in starts):
            bad = next((start for start in starts if start % size), None)
            raise ValueError(
                f"KVContractHiCacheStorage: host_indices of pool {self.name} must hold {size} token indices per key, "
                f"each key's first a page start (a multiple of page_size {size}); got {int(host_indices.numel())} "
                f"indices for {count} keys" + ("" if bad is None else f", one page starting at {bad}")
            )
        return [start // size for start in starts]

    def present(self, keys: Sequence[str], *, leading: bool) -> list[bool]:
        """Whether each page of ``keys`` is readable; with ``leading``, those after the first missing page are not asked.

        A tier that asks its server (Redis) answers ``RETRY`` first: every open key is asked
        again until it is answered or the timeout passes (then it is a miss).
        """
        if self.fenced():
            return [False] * len(keys)
        tier, retry, hit = self._tier, LookupResult.RETRY, LookupResult.HIT
        parts = [self.keys(key) for key in keys]
        answers: list[list[LookupResult]] = [[retry] * len(page) for page in parts]
        deadline = time.monotonic() + self.options.timeout_seconds
        while True:
            for page, page_answers in zip(parts, answers):
                for index, part in enumerate(page):
                    if page_answers[index] is retry:
                        page_answers[index] = tier.lookup(part)
                if leading and any(answer is not hit and answer is not retry for answer in page_answers):
                    break
            found = [all(answer is hit for answer in page) for page in answers]
            missing = [any(answer is not hit and answer is not retry for answer in page) for page in answers]
            first = next((index for index, ok in enumerate(found) if not ok), len(keys))
            asking = [not ok and not miss for ok, miss in zip(found, missing)]
            if not any(asking[: first + 1] if leading else asking) or time.monotonic() >= deadline:
                return found[:first] + [False] * (len(keys) - first) if leading else found
            time.sleep(_POLL_SECONDS)

    def count_lookups(self, asked: int, hits: int) -> None:
        with self._lock:
            self._count(lookups=asked, hits=hits)

    def transfer(self, keys: Sequence[str], pages: Sequence[int], *, store: bool) -> tuple[list[bool], int, float]:
        """Move ``keys`` between the tier and host pages ``pages``, one job per page: each page's answer, the bytes moved, the seconds."""
        if len(pages) != len(keys) or self.fenced():
            return [False] * len(keys), 0, 0.0
        started = time.perf_counter()
        staging = self._staging
        if staging is not None and (self.table.staged or self._copying):  # a staged table always has its slots
            answers = self._staged(staging, keys, pages, store)
        else:
            answers = self._in_place(keys, pages, store)
        moved = sum(answers)
        nbytes = moved * self.page_bytes
        failed = len(answers) - moved
        with self._lock:
            if store:
                self._count(written=moved, bytes_written=nbytes, cascade_failures=failed, failed_jobs=failed)
            else:
                self._count(promoted=moved, bytes_read=nbytes, promotion_failures=failed, failed_jobs=failed)
        return answers, nbytes, time.perf_counter() - started

    def _in_place(self, keys: Sequence[str], pages: Sequence[int], store: bool) -> list[bool]:
        """The zero-copy path: the tier moves the pages' own rows; a late job is waited out, then the pool copies."""
        table = self.table
        jobs = [TierJob(next(self._job_ids), self.keys(key), table.page_rows(page)) for key, page in zip(keys, pages)]
        submitted = [self._submit(job, store) for job in jobs]
        done, late = self._wait(
            [job for job, ok in zip(jobs, submitted) if ok],
            time.monotonic() + self.options.timeout_seconds,
            lose=False,
        )
        if late:
            with self._lock:
                self._copying = self._staging is not None  # with no staging page reserved, zero copy goes on, waiting
                self._on_time = 0
                self._late_jobs += len(late)
            _log.warning(
                "kvcontract HiCache backend: %d zero-copy tier jobs of pool %s did not report within %.1f s; waiting for "
                "them (they move SGLang's own host pages), then taking the copying path until the tier is on time again",
                len(late),
                self.name,
                self.options.timeout_seconds,
            )
            done.update(self._wait_out(late))
        return [ok and done.get(job.job_id, False) for job, ok in zip(jobs, submitted)]

    def _staged(self, staging: StagingRows, keys: Sequence[str], pages: Sequence[int], store: bool) -> list[bool]:
        """The copying path: pages move through ``staging``'s slots in rounds; a job late at the timeout is lost and keeps its slot."""
        deadline = time.monotonic() + self.options.timeout_seconds
        answers: list[bool] = []
        late: list[TierJob] = []
        while len(answers) < len(keys) and not late:
            slots = staging.take(len(keys) - len(answers))
            if not slots:
                break  # every slot is lent or held by a lost job: the rest are misses, never a wait for room
            at = len(answers)
            round_pages = pages[at : at + len(slots)]
            if store:
                for page, slot in zip(round_pages, slots):
                    self._copy_in(page, slot)
            jobs = [
                TierJob(next(self._job_ids), self.keys(key), slot)
                for key, slot in zip(keys[at : at + len(slots)], slots)
            ]
            submitted = [self._submit(job, store) for job in jobs]
            done, late = self._wait([job for job, ok in zip(jobs, submitted) if ok], deadline, lose=True)
            moved = [ok and done.get(job.job_id, False) for job, ok in zip(jobs, submitted)]
            if not store:
                for page, slot, ok in zip(round_pages, slots, moved):
                    if ok:
                        self._copy_out(slot, page)
            lost = {job.job_id for job in late}
            staging.give_back([slot for job, slot in zip(jobs, slots) if job.job_id not in lost])
            answers += moved
        if not self.table.staged:
            self._note_copying_call(on_time=not late)
        return answers + [False] * (len(keys) - len(answers))

    def _copy_in(self, page: int, slot: list[int]) -> None:
        """Host page ``page`` into staging slot ``slot``, before a store's job starts."""
        table = self.table
        if table.staged:
            table.rows[slot[0]].copy_(self._page_bytes(page))
        else:
            table.rows[slot] = table.rows[table.page_rows(page)]

    def _copy_out(self, slot: list[int], page: int) -> None:
        """Staging slot ``slot`` into host page ``page``, after a load's job succeeded within the call."""
        table = self.table
        if table.staged:
            self._set_page_bytes(page, table.rows[slot[0]])
        else:
            table.rows[table.page_rows(page)] = table.rows[slot]

    def _page_bytes(self, page: int) -> torch.Tensor:
        """Host page ``page`` of a copying layout as flat bytes (a copy): the split regions, else SGLang's page view."""
        if self.table.split is not None:
            return self.table.split.gather(page)
        flat: torch.Tensor = self.host_pool.get_data_page(page * self.page_size, flat=True)
        return flat.contiguous().view(torch.uint8).reshape(-1)

    def _set_page_bytes(self, page: int, data: torch.Tensor) -> None:
        """Flat bytes ``data`` into host page ``page`` of a copying layout, the way :meth:`_page_bytes` reads it."""
        if self.table.split is not None:
            self.table.split.scatter(page, data)
        else:
            self.host_pool.set_from_flat_data_page(page * self.page_size, data.view(self._flat_dtype))

    def read_page(self, page: int) -> torch.Tensor:
        """Host page ``page`` as flat bytes (a copy): its rows in place, else the copying layout's page bytes."""
        table = self.table
        if table.staged:
            return self._page_bytes(page)
        return table.rows[table.page_rows(page)].reshape(-1)

    def write_page(self, page: int, data: torch.Tensor) -> None:
        """Flat bytes ``data`` into host page ``page``, the way :meth:`read_page` reads it."""
        table = self.table
        if table.staged:
            self._set_page_bytes(page, data)
        else:
            table.rows[table.page_rows(page)] = data.view(table.regions, -1)

    def _note_copying_call(self, *, on_time: bool) -> None:
        """Count a zero-copy pool's copying-path call; after ``RECOVERY_CALLS`` on time in a row, none lost, go back to zero copy."""
        with self._lock:
            self._on_time = self._on_time + 1 if on_time else 0
            if self._copying and self.options.zero_copy and self._on_time >= RECOVERY_CALLS and not self._lost:
                self._copying = False
                _log.info(
                    "kvcontract HiCache backend: the tier of pool %s was on time for %d calls; back to the zero-copy path",
                    self.name,
                    RECOVERY_CALLS,
                )

    def _submit(self, job: TierJob, store: bool) -> bool:
        try:
            return self._tier.submit_store(job) if store else self._tier.submit_load(job)
        except Exception as error:  # a tier's fault fails the page, never SGLang's thread
            _log.warning(
                "kvcontract HiCache backend: the tier of pool %s refused job %d: %s", self.name, job.job_id, error
            )
            return False

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
                            "kvcontract HiCache backend: %d tier jobs of pool %s did not report within %.1f s; their "
                            "pages are misses and no new job starts until they report",
                            len(waiting),
                            self.name,
                            self.options.timeout_seconds,
                        )
                    return done, list(waiting.values())
            time.sleep(_POLL_SECONDS)

    def _wait_out(self, jobs: Sequence[TierJob]) -> dict[int, bool]:
        """The success of each of ``jobs``, however long the tier takes to report them: they move SGLang's own pages."""
        done: dict[int, bool] = {}
        while jobs:
            more, jobs = self._wait(jobs, time.monotonic() + self.options.timeout_seconds, lose=False)
            done.update(more)
            if jobs:
                _log.warning(
                    "kvcontract HiCache backend: still waiting for %d zero-copy tier jobs of pool %s",
                    len(jobs),
                    self.name,
                )
        return done

    def _collect(self) -> None:
        """Take the tier's finished jobs; a lost job's report frees its staging slot. Lock held."""
        for result in self._tier.get_finished():
            slot = self._lost.pop(result.job_id, None)
            if slot is None:
                self._results[result.job_id] = result.success
            elif self._staging is not None:
                self._staging.give_back([slot])

    def fenced(self) -> bool:
        """Whether a lost job is still out, or the store is closed (then no call starts a job, and nothing is a hit)."""
        if self._closed:
            return True
        with self._lock:
            if self._lost:
                self._collect()
            return bool(self._lost)

    def close(self) -> None:
        """Finish the tier's jobs, release it, and give the pages reserved in SGLang's pool back."""
        self._closed = True
        self._tier.shutdown()
        with self._lock:
            self._lost.clear()  # the tier's shutdown finished every job
            reserved, self._reserved = self._reserved, None
            scratch, self._scratch = self._scratch, None
        for indices in (reserved, scratch):
            if indices is not None:
                self.host_pool.free(indices)
