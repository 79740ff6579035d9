"""Tier jobs that report after the backend's timeout, on SGLang's real host pools: never a wrong byte, never an unbounded wait.

A host page is SGLang's only while a call runs. The tiers here are real file tiers whose jobs
start (and so read or write host memory) only when a gate opens, so a job that ran after its
call had returned would write a page SGLang has reused, or store bytes SGLang has since changed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from typing_extensions import override

from kvcontract.config import ConfigError
from kvcontract.contracts import LookupResult, OffloadKey, SecondaryTier, TierJob, TransferResult
from kvcontract.integrations.sglang import KVContractHiCacheStorage
from kvcontract.integrations.sglang.options import DEFAULT_POOL_STAGING_PAGES
from kvcontract.integrations.sglang.storage import RECOVERY_CALLS
from tests.integrations.sglang.support import (
    PAGE,
    PoolName,
    backend,
    fill_random,
    keys_for,
    mha_pool,
    page_bytes,
    storage_config,
    transfer,
)

TIMEOUT = 0.2
STALL = 0.6
"""How long a stalled tier holds its jobs: three timeouts."""
SLACK = 2.0
"""What a loaded machine may add to a wait (polls, file I/O, thread starts)."""


class _GatedTier(SecondaryTier):
    """A real tier that takes jobs but starts each only once ``gate`` is open: a tier that stalls with jobs in hand, then goes on."""

    def __init__(self, inner: SecondaryTier) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.threads: list[threading.Thread] = []
        self._refused: list[TransferResult] = []
        self._lock = threading.Lock()

    @override
    def lookup(self, key: OffloadKey) -> LookupResult:
        return self.inner.lookup(key)

    @override
    def submit_store(self, job: TierJob) -> bool:
        return self._later(self.inner.submit_store, job)

    @override
    def submit_load(self, job: TierJob) -> bool:
        return self._later(self.inner.submit_load, job)

    def _later(self, submit: Callable[[TierJob], bool], job: TierJob) -> bool:
        def start() -> None:
            self.gate.wait()
            if not submit(job):
                with self._lock:
                    self._refused.append(TransferResult(job.job_id, False))

        thread = threading.Thread(target=start, daemon=True)
        self.threads.append(thread)
        thread.start()
        return True

    @override
    def get_finished(self) -> list[TransferResult]:
        with self._lock:
            refused, self._refused = self._refused, []
        return self.inner.get_finished() + refused

    @override
    def shutdown(self) -> None:
        self.gate.set()
        self.inner.shutdown()


def _backend(pool: Any, root: Path, layout: str = "page_first") -> KVContractHiCacheStorage:
    tier = {"kind": "file", "path": str(root), "capacity": 256}
    return backend(
        pool, storage_config(root, layout=layout, extra={"kvcontract": {"tier": tier, "timeout_seconds": TIMEOUT}})
    )


def _gate(store: KVContractHiCacheStorage, *, opens_after: float | None = None) -> _GatedTier:
    """Put a gated tier around the backend's own file tier (by hand: SGLang never hands a backend a tier)."""
    inner = store.tier.inner if isinstance(store.tier, _GatedTier) else store.tier
    gated = _GatedTier(inner)
    store.pool("kv")._tier = gated  # pyright: ignore[reportPrivateUsage]  # a stalling tier can only be put in by hand
    if opens_after is not None:
        opener = threading.Timer(opens_after, gated.gate.set)
        opener.daemon = True
        opener.start()
    return gated


def _pages(pool: Any, indices: torch.Tensor) -> list[bytes]:
    return [page_bytes(pool, int(indices[i])) for i in range(0, len(indices), PAGE)]


def _refill(pool: Any, indices: torch.Tensor, seed: int) -> None:
    """New bytes in the pages ``indices``, as SGLang writes another request's KV there (never the backend's own pages)."""
    generator = torch.Generator().manual_seed(seed)
    for start in range(0, len(indices), PAGE):
        page = pool.get_dummy_flat_data_page()
        page.view(torch.uint8).copy_(
            torch.randint(0, 256, (page.numel() * page.element_size(),), dtype=torch.uint8, generator=generator)
        )
        pool.set_from_flat_data_page(int(indices[start]), page)


def _reads_back(root: Path, keys: list[str], layout: str = "page_first") -> list[bytes]:
    """The pages ``keys`` hold in the tier, through a new backend on a new pool."""
    pool = mha_pool(layout)
    reader = _backend(pool, root, layout)
    targets = pool.alloc(len(keys) * PAGE)
    assert reader.batch_get_v1(keys, targets) == [True] * len(keys)
    pages = _pages(pool, targets)
    reader.close()
    return pages


def _degraded(tmp_path: Path) -> tuple[Any, KVContractHiCacheStorage, list[str], torch.Tensor, list[bytes]]:
    """A page_first backend holding three pages whose zero-copy load was late: it now takes the copying path."""
    pool = mha_pool("page_first")
    store = _backend(pool, tmp_path)
    indices = pool.alloc(3 * PAGE)
    fill_random(pool, seed=1)
    keys, pages = keys_for("late", 3), _pages(pool, indices)
    assert store.batch_set_v1(keys, indices) == [True] * 3
    _gate(store, opens_after=STALL)
    assert store.batch_get_v1(keys, indices) == [True] * 3
    assert not store.zero_copy
    return pool, store, keys, indices, pages


def _until_reported(store: KVContractHiCacheStorage, keys: list[str]) -> None:
    """Wait until the lost jobs reported: the fence lifts and ``keys`` are found again."""
    deadline = time.monotonic() + SLACK + STALL
    while store.batch_exists(keys) != len(keys):
        assert time.monotonic() < deadline, "the lost jobs never reported"
        time.sleep(0.01)


def _changed_tokens(before: torch.Tensor, pool: Any) -> set[int]:
    """Token indices of the page_first pool whose bytes differ from ``before``."""
    changed = (before.view(torch.uint8) != pool.kv_buffer.view(torch.uint8)).nonzero()
    return set(changed[:, 1].tolist())


def test_a_late_zero_copy_load_is_waited_out_so_no_page_is_written_after_the_call(tmp_path: Path) -> None:
    pool = mha_pool("page_first")
    store = _backend(pool, tmp_path)
    indices = pool.alloc(3 * PAGE)
    fill_random(pool, seed=1)
    keys, expected = keys_for("load", 3), _pages(pool, indices)
    assert store.batch_set_v1(keys, indices) == [True] * 3
    fill_random(pool, seed=2)
    gated = _gate(store, opens_after=STALL)
    started = time.monotonic()
    assert store.batch_get_v1(keys, indices) == [True] * 3
    assert STALL <= time.monotonic() - started < STALL + SLACK  # waited for the tier's reports, no longer
    assert _pages(pool, indices) == expected  # landed before the call returned
    assert not any(thread.is_alive() for thread in gated.threads)  # every job had started and reported
    assert store.late_jobs == 3 and not store.zero_copy
    _refill(pool, indices, seed=3)  # SGLang reuses the pages once the call has returned
    before = pool.kv_buffer.clone()
    assert store.batch_exists(keys) == 3 and torch.equal(before.view(torch.uint8), pool.kv_buffer.view(torch.uint8))


def test_a_late_zero_copy_job_of_a_side_pool_is_waited_out_and_the_pool_stays_zero_copy(tmp_path: Path) -> None:
    """A side pool reserves no page of SGLang's (its pages may be indexed by the KV pool's allocator), so it never copies."""
    kv, swa = mha_pool("page_first"), mha_pool("page_first")
    store = _backend(kv, tmp_path)
    store.register_mem_host_pool_v2(swa, PoolName.SWA)
    side = store.pool("swa")
    indices = swa.alloc(2 * PAGE)
    fill_random(swa, seed=6)
    keys, expected = keys_for("side", 2), _pages(swa, indices)
    gated = _GatedTier(side.tier)
    side._tier = gated  # pyright: ignore[reportPrivateUsage]  # a stalling tier can only be put in by hand
    threading.Timer(STALL, gated.gate.set).start()
    started = time.monotonic()
    assert store.batch_set_v2([transfer("swa", keys, indices)]) == {PoolName.SWA: [True, True]}
    assert STALL <= time.monotonic() - started < STALL + SLACK  # waited for the tier's reports, no longer
    fill_random(swa, seed=7)
    assert store.batch_get_v2([transfer("swa", keys, indices)]) == {PoolName.SWA: [True, True]}
    assert _pages(swa, indices) == expected
    assert store.late_jobs == 2 and side.zero_copy and side.reserved is None


def test_a_late_zero_copy_store_keeps_the_bytes_of_the_call_not_what_sglang_writes_after(tmp_path: Path) -> None:
    pool = mha_pool("page_first")
    store = _backend(pool, tmp_path)
    indices = pool.alloc(2 * PAGE)
    fill_random(pool, seed=4)
    keys, expected = keys_for("store", 2), _pages(pool, indices)
    _gate(store, opens_after=STALL)
    started = time.monotonic()
    assert store.batch_set_v1(keys, indices) == [True, True]
    assert STALL <= time.monotonic() - started < STALL + SLACK
    _refill(pool, indices, seed=5)  # SGLang refills the pages with another request's KV
    assert _reads_back(tmp_path, keys) == expected


def test_after_a_late_job_a_stalled_load_is_a_miss_at_the_timeout_and_touches_only_staging_pages(
    tmp_path: Path,
) -> None:
    pool, store, keys, _, _ = _degraded(tmp_path)
    gated = _gate(store)
    targets = pool.alloc(3 * PAGE)
    started = time.monotonic()
    assert store.batch_get_v1(keys, targets) == [False] * 3
    assert time.monotonic() - started < TIMEOUT + SLACK  # the copying path keeps SGLang's timeout
    assert store.batch_set_v1(keys_for("fenced", 1), targets[:PAGE]) == [False]  # no new job while lost ones are out
    _refill(pool, targets, seed=6)  # SGLang reuses the pages of the missed load
    before = pool.kv_buffer.clone()
    gated.gate.set()
    _until_reported(store, keys)
    staging = store.pool("kv").reserved  # where the lost jobs were allowed to write
    assert staging is not None
    assert _changed_tokens(before, pool) <= set(staging.numpy().tolist())  # the late loads wrote staging pages only


def test_after_a_late_job_a_stalled_store_stores_the_bytes_of_the_call(tmp_path: Path) -> None:
    pool, store, _, _, _ = _degraded(tmp_path)
    gated = _gate(store)
    indices = pool.alloc(2 * PAGE)
    fill_random(pool, seed=7)
    keys, expected = keys_for("copied", 2), _pages(pool, indices)
    started = time.monotonic()
    assert store.batch_set_v1(keys, indices) == [False, False]
    assert time.monotonic() - started < TIMEOUT + SLACK
    _refill(pool, indices, seed=8)  # SGLang changes the pages after the failed set
    gated.gate.set()
    _until_reported(store, keys)  # the lost stores ran late, from the staging copies made in the call
    assert _reads_back(tmp_path, keys) == expected


def test_zero_copy_comes_back_after_the_recovery_calls(tmp_path: Path) -> None:
    pool, store, keys, indices, expected = _degraded(tmp_path)
    for _ in range(RECOVERY_CALLS - 1):
        _refill(pool, indices, seed=12)
        assert store.batch_get_v1(keys, indices) == [True] * 3 and _pages(pool, indices) == expected
        assert not store.zero_copy
    assert store.batch_get_v1(keys, indices) == [True] * 3
    assert store.zero_copy
    _refill(pool, indices, seed=13)
    assert store.batch_get_v1(keys, indices) == [True] * 3 and _pages(pool, indices) == expected


def test_the_copying_path_of_a_zero_copy_layout_reserves_its_staging_pages_from_sglangs_pool(tmp_path: Path) -> None:
    pool = mha_pool("page_first")
    free = pool.available_size()
    store = _backend(pool, tmp_path)
    assert pool.available_size() == free - (DEFAULT_POOL_STAGING_PAGES + 1) * PAGE  # and the old calls' page
    store.close()
    assert pool.available_size() == free


def test_a_late_call_on_the_copying_path_resets_the_recovery_count(tmp_path: Path) -> None:
    _, store, keys, indices, _ = _degraded(tmp_path)
    for _ in range(RECOVERY_CALLS - 1):
        store.batch_get_v1(keys, indices)
    gated = _gate(store, opens_after=STALL)
    assert store.batch_get_v1(keys, indices) == [False] * 3  # lost at the timeout
    gated.gate.set()
    _until_reported(store, keys)
    for _ in range(RECOVERY_CALLS - 1):
        store.batch_get_v1(keys, indices)
    assert not store.zero_copy


@pytest.mark.parametrize("layout", ["layer_first"])
def test_the_copying_layouts_lose_a_stalled_job_at_the_timeout_and_fence_until_it_reports(
    tmp_path: Path, layout: str
) -> None:
    pool = mha_pool(layout)
    store = _backend(pool, tmp_path, layout)
    gated = _gate(store)
    indices = pool.alloc(2 * PAGE)
    fill_random(pool, seed=9)
    keys, expected = keys_for("hung", 2), _pages(pool, indices)
    started = time.monotonic()
    assert store.batch_set_v1(keys, indices) == [False, False]
    assert time.monotonic() - started < TIMEOUT + SLACK
    assert store.batch_exists(keys) == 0  # fenced: no new job while the lost ones are out
    assert store.batch_set_v1(keys_for("next", 1), indices[:PAGE]) == [False]
    fill_random(pool, seed=10)
    before = pool.kv_buffer.clone()
    gated.gate.set()
    _until_reported(store, keys)  # the lost jobs reported: the fence lifts
    assert torch.equal(before.view(torch.uint8), pool.kv_buffer.view(torch.uint8))  # they wrote no page of SGLang's
    assert store.batch_set_v1(keys_for("next", 1), indices[:PAGE]) == [True]
    assert store.zero_copy is False and store.late_jobs == 0
    assert _reads_back(tmp_path, keys, layout) == expected


def test_zero_copy_false_keeps_the_timeout_on_a_page_first_layout_from_the_first_call(tmp_path: Path) -> None:
    pool = mha_pool("page_first")
    tier = {"kind": "file", "path": str(tmp_path), "capacity": 256}
    section = {"tier": tier, "timeout_seconds": TIMEOUT, "zero_copy": False}
    store = backend(pool, storage_config(tmp_path, layout="page_first", extra={"kvcontract": section}))
    indices = pool.alloc(2 * PAGE)
    fill_random(pool, seed=7)
    keys, expected = keys_for("copying", 2), _pages(pool, indices)
    assert not store.zero_copy
    assert store.batch_set_v1(keys, indices) == [True, True]
    gated = _gate(store)
    targets = pool.alloc(2 * PAGE)
    started = time.monotonic()
    assert store.batch_get_v1(keys, targets) == [False, False]
    assert time.monotonic() - started < TIMEOUT + SLACK  # a miss at the timeout, not a wait for the tier
    before = pool.kv_buffer.clone()
    gated.gate.set()
    _until_reported(store, keys)
    staging = store.pool("kv").reserved  # where the lost jobs were allowed to write
    assert staging is not None
    assert _changed_tokens(before, pool) <= set(staging.numpy().tolist())
    assert store.late_jobs == 0 and not store.zero_copy  # it never took the zero-copy path, and never goes back to it
    assert store.batch_get_v1(keys, targets) == [True, True] and _pages(pool, targets) == expected


def test_zero_copy_must_be_a_boolean(tmp_path: Path) -> None:
    tier = {"kind": "file", "path": str(tmp_path), "capacity": 256}
    with pytest.raises(ConfigError, match="kvcontract.zero_copy: give true or false, got 'no'"):
        backend(
            mha_pool("page_first"),
            storage_config(tmp_path, extra={"kvcontract": {"tier": tier, "zero_copy": "no"}}),
        )
