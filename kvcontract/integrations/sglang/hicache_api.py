"""SGLang's HiCache names the backend uses, typed once at the boundary.

SGLang ships no type information (no ``py.typed``; its own signatures say ``List`` and
``Optional[Any]``), so the type checkers see the declarations below, which state what
SGLang 0.5.23's ``hicache_storage`` module passes and expects; at run time the names are
SGLang's own classes. The tests run the backend on SGLang's real modules, so a declaration
that drifted from SGLang fails there.
"""

from __future__ import annotations

import enum
import importlib
from typing import TYPE_CHECKING, Any

import torch

__all__ = [
    "HiCacheStorage",
    "HiCacheStorageConfig",
    "HiCacheStorageExtraInfo",
    "PoolHitPolicy",
    "PoolName",
    "PoolTransfer",
    "PoolTransferResult",
    "new_storage_metrics",
]

if TYPE_CHECKING:

    class HiCacheStorageConfig:
        """What SGLang's controller tells a storage backend about the rank and the model."""

        tp_rank: int
        tp_size: int
        pp_rank: int
        pp_size: int
        attn_cp_rank: int
        attn_cp_size: int
        is_mla_model: bool
        enable_storage_metrics: bool
        is_page_first_layout: bool
        model_name: str | None
        extra_config: dict[str, object] | None
        dcp_size: int
        dcp_rank: int

        @property
        def is_storage_writer(self) -> bool: ...

    class HiCacheStorageExtraInfo:
        """The page hashes before a call's keys (unused by kvcontract: its keys are the page hashes)."""

    class PoolName(enum.StrEnum):
        """SGLang's names of its host pools (those the backend names itself)."""

        KV = "kv"
        MAMBA = "mamba"
        SWA = "swa"
        INDEXER = "indexer"

    class PoolHitPolicy(enum.StrEnum):
        """How ``batch_exists_v2`` finds a side pool's pages present beside the KV prefix."""

        ALL_PAGES = "all_pages"
        TRAILING_PAGES = "trailing_pages"
        BLOCK_GROUPS = "block_groups"

    class PoolTransfer:
        """One hybrid pool's part of a v2 call: its name, its pages' keys and host token indices, its hit rule."""

        name: PoolName
        host_indices: torch.Tensor | None
        keys: list[str] | None
        hit_policy: PoolHitPolicy
        indices_from_pool: PoolName | None
        block_pages: int
        group_pages: int

    class PoolTransferResult:
        """A v2 existence answer: the usable KV prefix, each pool's own boundary, every restorable prefix length."""

        kv_hit_pages: int
        extra_pool_hit_pages: dict[str, int]
        restorable_prefix_pages: list[int] | None

        def __init__(
            self,
            kv_hit_pages: int,
            extra_pool_hit_pages: dict[str, int],
            restorable_prefix_pages: list[int] | None = None,
        ) -> None: ...

    class StorageMetrics:  # at run time only through new_storage_metrics: its module imports SGLang's server
        """SGLang's storage metrics of one interval: pages and GB/s per prefetch and backup call."""

        prefetch_pgs: list[int]
        backup_pgs: list[int]
        prefetch_bandwidth: list[float]
        backup_bandwidth: list[float]

    class HiCacheStorage:
        """SGLang's storage backend base: the calls its cache controller makes."""

        mem_pool_host: Any

        def register_mem_pool_host(self, mem_pool_host: Any) -> None: ...
        def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None: ...
        def on_host_pools_registered(self) -> None: ...
        def batch_exists(self, keys: list[str], extra_info: HiCacheStorageExtraInfo | None = None) -> int: ...
        def exists(self, key: str) -> bool: ...
        def batch_get_v1(
            self, keys: list[str], host_indices: torch.Tensor, extra_info: HiCacheStorageExtraInfo | None = None
        ) -> list[bool]: ...
        def batch_set_v1(
            self, keys: list[str], host_indices: torch.Tensor, extra_info: HiCacheStorageExtraInfo | None = None
        ) -> list[bool]: ...
        def get(
            self, key: str, target_location: Any | None = None, target_sizes: Any | None = None
        ) -> torch.Tensor | None: ...
        def batch_get(
            self, keys: list[str], target_locations: Any | None = None, target_sizes: Any | None = None
        ) -> list[torch.Tensor | None]: ...
        def set(
            self,
            key: str,
            value: Any | None = None,
            target_location: Any | None = None,
            target_sizes: Any | None = None,
        ) -> bool: ...
        def batch_set(
            self,
            keys: list[str],
            values: Any | None = None,
            target_locations: Any | None = None,
            target_sizes: Any | None = None,
        ) -> bool: ...
        def batch_exists_v2(
            self,
            keys: list[str],
            pool_transfers: list[PoolTransfer] | None = None,
            extra_info: HiCacheStorageExtraInfo | None = None,
        ) -> PoolTransferResult: ...
        def batch_get_v2(
            self, transfers: list[PoolTransfer], extra_info: HiCacheStorageExtraInfo | None = None
        ) -> dict[str, list[bool]]: ...
        def batch_set_v2(
            self, transfers: list[PoolTransfer], extra_info: HiCacheStorageExtraInfo | None = None
        ) -> dict[str, list[bool]]: ...
        def get_stats(self) -> object: ...

else:
    from sglang.srt.mem_cache.hicache_storage import (
        HiCacheStorage,
        HiCacheStorageConfig,
        HiCacheStorageExtraInfo,
        PoolHitPolicy,
        PoolName,
        PoolTransfer,
        PoolTransferResult,
    )


def new_storage_metrics() -> StorageMetrics:
    """An empty ``StorageMetrics``; its module imports SGLang's whole server, so only when a backend is built."""
    module = importlib.import_module("sglang.srt.observability.metrics_collector")
    metrics: StorageMetrics = module.StorageMetrics()
    return metrics
