"""Misuse of SGLang's HiCache backend: its constructor, its options and SGLang's calls into it."""

from __future__ import annotations

import torch

from kvcontract.integrations.sglang import KVContractHiCacheStorage
from kvcontract.integrations.sglang.hicache_api import HiCacheStorageConfig
from kvcontract.integrations.sglang.options import backend_options


def misuse(store: KVContractHiCacheStorage, config: HiCacheStorageConfig, indices: torch.Tensor) -> None:
    KVContractHiCacheStorage({"kvcontract": {"tier": {"kind": "file"}}})  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    KVContractHiCacheStorage(config, ["timeout_seconds"])  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    backend_options(config.extra_config, "4096", 2)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    store.batch_exists("0" * 64)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    store.batch_set_v1(("a", "b"), indices)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    store.batch_get_v1(["a"], [0, 1, 2, 3])  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    late: bool = store.zero_copy
    count: str = store.late_jobs  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]
    del late, count
