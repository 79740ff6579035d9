"""``KVContractHiCacheStorage``: kvcontract's tiers as SGLang's HiCache storage layer, every host pool of a hybrid model.

SGLang's prefetch, backup and I/O threads call the backend synchronously: ``batch_exists``
(hits from the first key up to the first miss), then ``batch_get_v1`` / ``batch_set_v1`` with
up to 128 pages of the full-attention KV pool and their token indices in the host pool. A
hybrid model's other pools (sliding-window KV, Mamba state, the DSA indexer, draft pools)
come through the ``*_v2`` calls, one ``PoolTransfer`` per pool: ``batch_exists_v2`` finds the
KV prefix, then cuts it to what every pool can serve by the pool's hit rule (``ALL_PAGES``:
every page of the prefix; ``TRAILING_PAGES``: the last N pages before the stop point, so a
prefix may be restorable at 5 pages and not at 4; ``BLOCK_GROUPS``: the pool's own verdict,
whole groups from the span start, never a cut of the KV hit), and ``batch_get_v2`` /
``batch_set_v2`` move each pool's pages. Each registered pool is a :class:`.PoolStore` with
its own tier and identity; each page becomes one tier job, so every page gets its own answer.

SGLang's older calls (``get``, ``set``, ``batch_get``, ``batch_set``, ``exists``) move whole
flat pages of the KV pool through one page of it the backend keeps for them, with the same
tier jobs. A pool the backend has no page view of is refused when SGLang registers it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from typing_extensions import override

from kvcontract.contracts import BlockIdentity, SecondaryTier
from kvcontract.integrations.sglang.hicache_api import (
    HiCacheStorage,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolHitPolicy,
    PoolName,
    PoolTransfer,
    PoolTransferResult,
    new_storage_metrics,
)
from kvcontract.integrations.sglang.options import check_keys
from kvcontract.integrations.sglang.pool_store import KV_POOL, RECOVERY_CALLS, PoolStore, attach_pool
from kvcontract.managers import TierStats
from kvcontract.metrics import MetricSample, tier_samples

if TYPE_CHECKING:
    from kvcontract.integrations.sglang.hicache_api import StorageMetrics

__all__ = ["RECOVERY_CALLS", "KVContractHiCacheStorage"]

_log = logging.getLogger(__name__)
_NOT_YET = "KVContractHiCacheStorage: SGLang has not registered its host pool yet (register_mem_pool_host)"


class KVContractHiCacheStorage(HiCacheStorage):
    """SGLang's HiCache storage, backed by the kvcontract tier the extra config's ``kvcontract`` section names.

    SGLang builds it as ``cls(storage_config, kwargs)`` and hands it the KV host pool with
    ``register_mem_pool_host`` (and a hybrid model's other pools with ``register_mem_host_pool_v2``);
    each pool's tier, page table and block identity are built then, so a tier that already holds
    this identity's pages serves them at the first call.
    """

    def __init__(self, storage_config: HiCacheStorageConfig, kwargs: Mapping[str, object] | None = None) -> None:
        self._config = storage_config
        check_keys(storage_config.extra_config)  # refused before SGLang goes on; sizes need the pool's page bytes
        self._pools: dict[str, PoolStore] = {}
        """Each registered pool's store, by SGLang's pool name; none before SGLang registers one."""
        self._lock = threading.Lock()
        self._interval = new_storage_metrics()
        self._closed = False

    @override
    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        if KV_POOL in self._pools or self._closed:
            # A second pool would leave the first tier running and its pages reserved (68 host pages).
            raise RuntimeError(
                "KVContractHiCacheStorage: register_mem_pool_host was called again; one backend serves one host "
                "pool for its life: close() it and build a new backend for another pool"
            )
        super().register_mem_pool_host(mem_pool_host)
        self._pools[KV_POOL] = attach_pool(KV_POOL, mem_pool_host, self._config)

    @override
    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        name = str(host_pool_name)
        anchor = self._pools.get(KV_POOL)
        if name == KV_POOL and anchor is not None and anchor.host_pool is host_pool:
            return  # SGLang's hybrid controller names the KV pool again, after register_mem_pool_host
        if name in self._pools or self._closed:
            raise RuntimeError(
                f"KVContractHiCacheStorage: SGLang's pool {name!r} was registered again; one backend serves each pool "
                "for its life: close() it and build a new backend"
            )
        super().register_mem_host_pool_v2(host_pool, host_pool_name)
        self._pools[name] = attach_pool(name, host_pool, self._config)

    def _kv(self) -> PoolStore:
        """The KV pool's store, or the one error saying SGLang has not registered it."""
        store = self._pools.get(KV_POOL)
        if store is None:
            raise RuntimeError(_NOT_YET)
        return store

    def _registered(self, name: object) -> PoolStore:
        """The store of the pool a v2 transfer names; a pool never registered is SGLang's mistake, said in one line."""
        store = self._pools.get(str(name))
        if store is None:
            raise ValueError(
                f"KVContractHiCacheStorage: a v2 call names pool {str(name)!r}, which SGLang never registered "
                f"(register_mem_host_pool_v2); registered: {', '.join(sorted(self._pools)) or 'none'}"
            )
        return store

    @property
    def tier(self) -> SecondaryTier:
        """The kvcontract tier serving the KV pool as storage (after SGLang registered its host pool)."""
        return self._kv().tier

    @property
    def identity(self) -> BlockIdentity:
        """The block identity of this rank's KV pages."""
        return self._kv().identity

    def pool(self, name: str) -> PoolStore:
        """The store of SGLang's pool ``name`` (``kv``, ``swa``, ``mamba``, ``indexer``, ...), once registered."""
        return self._registered(name)

    @property
    def pool_names(self) -> list[str]:
        """The pools registered so far, by SGLang's names."""
        return sorted(self._pools)

    @property
    def zero_copy(self) -> bool:
        """Whether the tier reads and writes the KV pool in place now (page-first layouts, while no job was late)."""
        store = self._pools.get(KV_POOL)
        return store is not None and store.zero_copy

    @property
    def late_jobs(self) -> int:
        """Zero-copy jobs that reported after ``timeout_seconds`` (each one made SGLang wait for it), every pool's."""
        return sum(store.late_jobs for store in self._pools.values())

    @staticmethod
    def _check_keys(keys: Sequence[object]) -> None:
        # SGLang's keys, checked once here (bytes keys ended in a traceback); its annotation says str, hence type().
        wrong = next((key for key in keys if type(key) is not str), None)
        if wrong is not None:
            raise TypeError(
                f"KVContractHiCacheStorage: keys are SGLang's page hashes as str, got {type(wrong).__name__}"
            )

    def _leading(self, store: PoolStore, keys: list[str]) -> int:
        """How many of ``keys`` ``store`` holds, from the first up to the first it does not."""
        hits = sum(store.present(keys, leading=True))
        store.count_lookups(min(hits + 1, len(keys)), hits)
        return hits

    @override
    def batch_exists(self, keys: list[str], extra_info: HiCacheStorageExtraInfo | None = None) -> int:
        self._check_keys(keys)
        store = self._pools.get(KV_POOL)
        if store is None or self._closed or not keys:
            return 0
        return self._leading(store, keys)

    @override
    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    @override
    def batch_get_v1(
        self, keys: list[str], host_indices: torch.Tensor, extra_info: HiCacheStorageExtraInfo | None = None
    ) -> list[bool]:
        store = self._kv()
        return self._moved(store, keys, store.pages(host_indices, len(keys)), store=False)

    @override
    def batch_set_v1(
        self, keys: list[str], host_indices: torch.Tensor, extra_info: HiCacheStorageExtraInfo | None = None
    ) -> list[bool]:
        store = self._kv()
        if not store.writes:
            return [True] * len(keys)  # MLA: one writer rank stores the page every rank reads
        return self._moved(store, keys, store.pages(host_indices, len(keys)), store=True)

    def _moved(self, pool: PoolStore, keys: Sequence[str], pages: Sequence[int], *, store: bool) -> list[bool]:
        """Move ``keys`` between ``pool``'s tier and its host pages ``pages``; each page's answer, counted for SGLang's metrics."""
        answers, nbytes, seconds = pool.transfer(keys, pages, store=store)
        bandwidth = nbytes / seconds / 1e9 if seconds > 0 else 0.0
        with self._lock:
            if store:
                self._interval.backup_pgs.append(sum(answers))
                self._interval.backup_bandwidth.append(bandwidth)
            else:
                self._interval.prefetch_pgs.append(sum(answers))
                self._interval.prefetch_bandwidth.append(bandwidth)
        return answers

    @override
    def batch_exists_v2(
        self,
        keys: list[str],
        pool_transfers: list[PoolTransfer] | None = None,
        extra_info: HiCacheStorageExtraInfo | None = None,
    ) -> PoolTransferResult:
        """The KV prefix every pool can serve: each prefix length the KV pool holds, cut by every pool's hit rule.

        ``kv_hit_pages`` is the longest prefix left, ``restorable_prefix_pages`` every one left
        (a ``TRAILING_PAGES`` pool leaves holes, which SGLang intersects across ranks), and
        ``extra_pool_hit_pages`` each pool's own boundary.
        """
        self._check_keys(keys)
        kv = self._pools.get(KV_POOL)
        if kv is None or self._closed or not keys:
            return PoolTransferResult(0, {}, [])
        kv_pages = self._leading(kv, keys)
        hits: dict[str, int] = {PoolName.KV: kv_pages} if kv_pages else {}
        restorable = set(range(1, kv_pages + 1))
        span = keys[:kv_pages]
        for transfer in pool_transfers or []:
            store = self._registered(transfer.name)
            policy = transfer.hit_policy
            if policy == PoolHitPolicy.BLOCK_GROUPS:  # the pool's own verdict: it never cuts the KV prefix
                covered = self._block_groups(store, transfer, len(keys))
                if covered:
                    hits[transfer.name] = covered
                continue
            if not restorable:
                break
            if policy == PoolHitPolicy.ALL_PAGES:
                boundary = self._leading(store, span)
                served = set(range(1, boundary + 1))
            elif policy == PoolHitPolicy.TRAILING_PAGES:
                window = max(1, len(transfer.keys or ()))
                found = store.present(span, leading=False)
                served = {stop for stop in range(1, kv_pages + 1) if all(found[max(0, stop - window) : stop])}
                boundary = max(served, default=0)
            else:
                raise ValueError(f"KVContractHiCacheStorage: pool {transfer.name}: unknown hit policy {policy!r}")
            if boundary:
                hits[transfer.name] = boundary
            restorable &= served
        return PoolTransferResult(max(restorable, default=0), hits, sorted(restorable))

    def _block_groups(self, store: PoolStore, transfer: PoolTransfer, span_pages: int) -> int:
        """The pages a ``BLOCK_GROUPS`` pool's leading complete groups cover: ``group_pages`` keys hold ``block_pages`` pages."""
        if transfer.group_pages < 1 or transfer.block_pages < 1:
            raise ValueError(
                f"KVContractHiCacheStorage: pool {transfer.name}: a BLOCK_GROUPS transfer needs group_pages and "
                f"block_pages of at least 1, got {transfer.group_pages} and {transfer.block_pages}"
            )
        keys = list(transfer.keys or [])
        self._check_keys(keys)
        found = store.present(keys, leading=True)
        groups = sum(found) // transfer.group_pages
        return min(groups * transfer.block_pages, span_pages)

    @override
    def batch_get_v2(
        self, transfers: list[PoolTransfer], extra_info: HiCacheStorageExtraInfo | None = None
    ) -> dict[str, list[bool]]:
        return self._transfers_v2(transfers, store=False)

    @override
    def batch_set_v2(
        self, transfers: list[PoolTransfer], extra_info: HiCacheStorageExtraInfo | None = None
    ) -> dict[str, list[bool]]:
        return self._transfers_v2(transfers, store=True)

    def _transfers_v2(self, transfers: Sequence[PoolTransfer], *, store: bool) -> dict[str, list[bool]]:
        """Each transfer's pages moved between its pool's host pages and that pool's tier: each page's answer, by pool."""
        results: dict[str, list[bool]] = {}
        for transfer in transfers:
            pool = self._registered(transfer.name)
            keys = list(transfer.keys or [])
            self._check_keys(keys)
            if store and not pool.writes:
                results[transfer.name] = [True] * len(keys)  # MLA's replicated pools: one writer rank stores them
                continue
            if transfer.host_indices is None:
                raise ValueError(
                    f"KVContractHiCacheStorage: the v2 transfer of pool {transfer.name} has keys but no host_indices"
                )
            pages = pool.pages(transfer.host_indices, len(keys)) if keys else []
            results[transfer.name] = self._moved(pool, keys, pages, store=store)
        return results

    def _check_page_sized(self, store: PoolStore, tensor: torch.Tensor, what: str) -> None:
        """Refuse a tensor of the old calls that is not one page's bytes (SGLang's mistake, checked once here)."""
        nbytes = tensor.numel() * tensor.element_size()
        if nbytes != store.page_bytes or not tensor.is_contiguous():
            raise ValueError(
                f"KVContractHiCacheStorage: {what} holds {nbytes} bytes"
                f"{'' if tensor.is_contiguous() else ', not contiguous'}: give one page, {store.page_bytes} contiguous bytes"
            )

    @override
    def get(self, key: str, target_location: Any | None = None, target_sizes: Any | None = None) -> torch.Tensor | None:
        store = self._pools.get(KV_POOL)
        if store is None or store.scratch_page is None or target_location is None:
            return None
        target: torch.Tensor = target_location
        self._check_page_sized(store, target, "get's target_location")
        with store.scratch_lock:
            if not self._moved(store, [key], [store.scratch_page], store=False)[0]:
                return None
            target.view(-1).copy_(store.read_page(store.scratch_page).view(target.dtype))
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
        store = self._pools.get(KV_POOL)
        if store is None or store.scratch_page is None or value is None:
            return False
        if not store.writes:
            return True
        data: torch.Tensor = value
        self._check_page_sized(store, data, "set's value")
        with store.scratch_lock:
            store.write_page(store.scratch_page, data.reshape(-1).view(torch.uint8))
            return self._moved(store, [key], [store.scratch_page], store=True)[0]

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
    def get_stats(self) -> StorageMetrics:
        """SGLang's storage metrics since its last call: pages and bandwidth (GB/s) per prefetch and backup call."""
        with self._lock:
            interval, self._interval = self._interval, new_storage_metrics()
        return interval

    def pool_stats(self) -> dict[str, TierStats]:
        """Each registered pool's counters in kvcontract's tier terms, with its tier's own checksum and identity counts."""
        stats: dict[str, TierStats] = {}
        for name, store in sorted(self._pools.items()):
            stats[name] = store.stats().reported_by(store.tier)
        return stats

    def tier_stats(self) -> TierStats:
        """The backend's counters in kvcontract's tier terms, every pool's together."""
        total = TierStats("sglang")
        for counts in self.pool_stats().values():
            total = dataclasses.replace(
                total,
                reachable=total.reachable and counts.reachable,
                **{
                    field.name: getattr(total, field.name) + getattr(counts, field.name)
                    for field in dataclasses.fields(TierStats)
                    if field.type in (int, "int")
                },
            )
        return total

    def metrics_source(self) -> Iterator[MetricSample]:
        """kvcontract's metrics of this backend, for :meth:`kvcontract.metrics.MetricsCollector.add` (``tier=sglang``)."""
        return iter(tier_samples(self.tier_stats(), "sglang"))

    def close(self) -> None:
        """SGLang's detach: finish every pool's tier jobs, release the tiers, and give reserved pages back to the pools."""
        self._closed = True
        for store in self._pools.values():
            store.close()
