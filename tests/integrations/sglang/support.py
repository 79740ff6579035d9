"""SGLang's real host pools and storage config on the CPU, and the backend built by SGLang's own factory.

SGLang ships no type information, so its modules are reached through ``import_module`` and
its objects are ``Any`` here; the backend's side is typed (``kvcontract.integrations.sglang``).

The CPU stand-ins for what CUDA provides, all in one place; SGLang's own modules are used as they are.

- torchvision: SGLang's config package imports ``torchvision.transforms`` for its vision
  models; torchvision's wheel does not load on the CPU torch, and HiCache never calls it, so
  an empty module answers the import (and says version 0.0, so transformers takes no
  torchvision path).
- pinned host memory: ``cudaHostRegister`` pins the host pool for the GPU's copy engines and
  needs a GPU. The storage-layer tests build host pools with SGLang's own ``pin_memory=False``;
  the whole ``UnifiedRadixCache`` builds its pool itself with ``pin_memory=True``, so
  ``radix_cache_stand_ins`` registers nothing (on the CPU the pool is already where every copy
  reads it).
- the device<->host copy kernels of ``sgl_kernel``: SGLang binds them only on CUDA and ROCm.
  ``radix_cache_stand_ins`` gives the three that ``--hicache-io-backend direct`` calls (on
  ``layer_first`` one copy of token rows both ways; on ``page_first_direct`` all layers
  device->host and one layer host->device) as torch index copies with the kernels' arguments
  and meaning; in ``page_first_direct`` token ``t`` of the host pool is row ``t % page_size``
  of page ``t // page_size``.

Importing this module puts the torchvision stand-in in place before SGLang's modules load.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.machinery
import sys
import types
from collections.abc import Generator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import torch.distributed as dist
from typing_extensions import override

_TORCHVISION = (
    "torchvision",
    "torchvision.transforms",
    "torchvision.transforms.functional",
    "torchvision.transforms.v2",
    "torchvision.transforms.v2.functional",
    "torchvision.io",
    "torchvision.ops",
)


class _Name(type):
    """A class whose every attribute is its name: what SGLang's vision code reads at import (enum members)."""

    def __getattr__(cls, name: str) -> str:
        if name.startswith("__"):
            raise AttributeError(name)
        return name


class _AbsentModule(types.ModuleType):
    """Stands in for a torchvision module: any name it is asked for is an empty class."""

    @override
    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Name(name, (), {})


def install_stand_ins() -> None:
    """Put the torchvision stand-in in ``sys.modules`` (once; a real torchvision that loads is left alone)."""
    if "torchvision" in sys.modules:
        return
    try:
        importlib.import_module("torchvision")  # a working install needs no stand-in
        return
    except Exception:  # missing, or its wheel does not load on the CPU torch
        sys.modules.pop("torchvision", None)
    for name in _TORCHVISION:
        module = _AbsentModule(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
        module.__path__ = []
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
    setattr(sys.modules["torchvision"], "__version__", "0.0")


def _register_nothing(buffer: torch.Tensor, registration_granularity_bytes: int | None = None) -> None:
    """``cudaHostRegister`` without a GPU: no range is registered, so the pool's teardown unregisters none."""
    del registration_granularity_bytes
    setattr(
        buffer, importlib.import_module("sglang.srt.mem_cache.pool_host.common")._CUDA_HOST_REGISTERED_RANGES_ATTR, []
    )


def _token_rows(
    src_layers: Sequence[torch.Tensor],
    dst_layers: Sequence[torch.Tensor],
    src_indices: torch.Tensor,
    dst_indices: torch.Tensor,
    page_size: int,
) -> None:
    """``transfer_kv_direct``: token rows of each source layer into the same rows of its destination layer."""
    del page_size
    for src, dst in zip(src_layers, dst_layers, strict=True):
        dst[dst_indices] = src[src_indices]


def _all_layers_device_to_host(
    src_ptrs: Sequence[torch.Tensor],
    dst_ptrs: Sequence[torch.Tensor],
    src_indices: torch.Tensor,
    dst_indices: torch.Tensor,
    page_size: int,
) -> None:
    """``transfer_kv_all_layer_direct_lf_pf``: each layer's device rows (K layers, then V; MLA: its one buffer's) into the page-first host buffers."""
    layers = len(src_ptrs) // len(dst_ptrs)
    pages, rows = dst_indices // page_size, dst_indices % page_size
    for side, dst in enumerate(dst_ptrs):
        for layer in range(layers):
            dst[pages, layer, rows] = src_ptrs[side * layers + layer][src_indices]


def _one_layer_host_to_device(
    src_ptrs: Sequence[torch.Tensor],
    dst_ptrs: Sequence[torch.Tensor],
    src_indices: torch.Tensor,
    dst_indices: torch.Tensor,
    layer_id: int,
    page_size: int,
) -> None:
    """``transfer_kv_per_layer_direct_pf_lf``: one layer of the page-first host buffers into that layer's device rows."""
    pages, rows = src_indices // page_size, src_indices % page_size
    for src, dst in zip(src_ptrs, dst_ptrs, strict=True):
        dst[dst_indices] = src[pages, layer_id, rows]


@contextlib.contextmanager
def radix_cache_stand_ins() -> Generator[None, None, None]:
    """Pinned memory and the three copy kernels above, for the whole ``UnifiedRadixCache`` on the CPU; SGLang's modules as they were on leaving."""
    common = importlib.import_module("sglang.srt.mem_cache.pool_host.common")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(common, "_cuda_host_register", _register_nothing)
        for pool in ("mha", "mla"):  # each host pool module binds the kernels itself
            module = importlib.import_module(f"sglang.srt.mem_cache.pool_host.{pool}")
            patch.setattr(module, "transfer_kv_direct", _token_rows, raising=False)
            patch.setattr(module, "transfer_kv_all_layer_direct_lf_pf", _all_layers_device_to_host, raising=False)
            patch.setattr(module, "transfer_kv_per_layer_direct_pf_lf", _one_layer_host_to_device, raising=False)
        yield


install_stand_ins()

from kvcontract.integrations.sglang import KVContractHiCacheStorage  # noqa: E402
from kvcontract.integrations.sglang.hicache_api import HiCacheStorageConfig  # noqa: E402

_pools = importlib.import_module("sglang.srt.mem_cache.device_pool_info")
_mha = importlib.import_module("sglang.srt.mem_cache.pool_host.mha")
_mla = importlib.import_module("sglang.srt.mem_cache.pool_host.mla")
_factory = importlib.import_module("sglang.srt.mem_cache.storage.backend_factory")
_mamba = importlib.import_module("sglang.srt.mem_cache.pool_host.mamba")
_dsa = importlib.import_module("sglang.srt.mem_cache.pool_host.dsa")
_decls = importlib.import_module("sglang.srt.mem_cache.pool_host.host_pool_decl")
_hicache = importlib.import_module("sglang.srt.mem_cache.hicache_storage")
_runtime = importlib.import_module("sglang.srt.runtime_context")
PoolName: Any = _hicache.PoolName
PoolHitPolicy: Any = _hicache.PoolHitPolicy
PoolTransfer: Any = _hicache.PoolTransfer

LAYERS, HEADS, HEAD_DIM, PAGE = 2, 2, 8, 4
MHA_LAYOUTS = ("layer_first", "page_first", "page_first_direct", "page_head")
MLA_LAYOUTS = ("layer_first", "page_first", "page_first_direct")
DEVICE_TOKENS = 64


def mha_pool(layout: str, *, dtype: torch.dtype = torch.bfloat16, layers: int = LAYERS, heads: int = HEADS) -> Any:
    """SGLang's MHA host pool over CPU "device" buffers, host memory unpinned (SGLang's own option)."""
    k = tuple(torch.zeros(DEVICE_TOKENS, heads, HEAD_DIM, dtype=dtype) for _ in range(layers))
    v = tuple(torch.zeros(DEVICE_TOKENS, heads, HEAD_DIM, dtype=dtype) for _ in range(layers))
    pointers = [torch.tensor([t.data_ptr() for t in side], dtype=torch.uint64) for side in (k, v)]
    info = _pools.MHABufferInfo(
        buffers=_pools.KVBuffers(
            k=k, v=v, k_data_ptrs=pointers[0], v_data_ptrs=pointers[1], layout=_pools.KVBufferLayout.NHD
        ),
        page_size=PAGE,
        head_num=heads,
        head_dim=HEAD_DIM,
        v_head_dim=HEAD_DIM,
        dtype=dtype,
        device=torch.device("cpu"),
    )
    return _mha.MHATokenToKVPoolHost(
        info,
        2.0,
        0,
        PAGE,
        layout,
        pin_memory=False,
        device="cpu",
        device_capacity_tokens=DEVICE_TOKENS,
        start_layer=0,
        end_layer=layers - 1,
    )


def mla_pool(layout: str) -> Any:
    """SGLang's MLA host pool over CPU "device" buffers: one latent row (K and V together) per token and layer."""
    lora, rope = 16, 8
    buffers = tuple(torch.zeros(DEVICE_TOKENS, 1, lora + rope, dtype=torch.bfloat16) for _ in range(LAYERS))
    data_ptrs = torch.tensor([t.data_ptr() for t in buffers], dtype=torch.uint64)
    return _mla_host_pool(buffers, data_ptrs, lora, rope, layout)


def mla_split_pool(*, indexer: bool = False, dcp_size: int = 1) -> Any:
    """SGLang's MLA host pool in ``page_first_kv_split`` (Ascend's layout): built from split K and V buffers (and a DSA indexer's K on the last layer), as its NPU pool hands them."""
    lora, rope, index_width = 16, 8, 4
    k = torch.zeros(LAYERS, DEVICE_TOKENS, 1, lora, dtype=torch.bfloat16)
    v = torch.zeros(LAYERS, DEVICE_TOKENS, 1, rope, dtype=torch.bfloat16)
    index_k = torch.zeros(1, DEVICE_TOKENS, 1, index_width, dtype=torch.bfloat16) if indexer else None
    split = _pools.MLASplitBuffers(
        k=k,
        v=v,
        index_k=index_k,
        index_scales=None,
        index_layer_indices=(LAYERS - 1,) if indexer else (),
        k_width=lora,
        v_width=rope,
        index_width=index_width if indexer else 0,
    )
    return _mla_host_pool(split, None, lora, rope, "page_first_kv_split", dcp_size=dcp_size, dcp_rank=0)


def _mla_host_pool(
    buffers: Any, data_ptrs: torch.Tensor | None, lora: int, rope: int, layout: str, **parallel: int
) -> Any:
    """SGLang's MLA host pool of ``layout`` over the device ``buffers`` (``parallel``: decode context parallelism)."""
    info = _pools.MLABufferInfo(
        buffers=buffers,
        data_ptrs=data_ptrs,
        layer_indices=tuple(range(LAYERS)),
        device_layer_num=LAYERS,
        page_size=PAGE,
        kv_lora_rank=lora,
        qk_rope_head_dim=rope,
        kv_cache_dim=lora + rope,
        dtype=torch.bfloat16,
        device=torch.device("cpu"),
    )
    return _mla.MLATokenToKVPoolHost(
        info,
        2.0,
        0,
        PAGE,
        layout,
        pin_memory=False,
        device="cpu",
        device_capacity_tokens=DEVICE_TOKENS,
        start_layer=0,
        end_layer=LAYERS - 1,
        target_layer_num=LAYERS,
        **parallel,
    )


MAMBA_SLOTS = 16


def mamba_pool(*, conv_width: int = 6) -> Any:
    """SGLang's Mamba state host pool (``page_first``, one state slot a page) over CPU "device" states: fp32 temporal, bf16 conv."""
    temporal = torch.zeros(LAYERS, MAMBA_SLOTS, 2, 4, 4, dtype=torch.float32)
    conv = (torch.zeros(LAYERS, MAMBA_SLOTS, 3, conv_width, dtype=torch.bfloat16),)
    info = _pools.MambaStateBufferInfo(temporal=temporal, conv=conv)
    return _mamba.MambaPoolHost(
        info, 2.0, 0, device_capacity=MAMBA_SLOTS, pin_memory=False, device="cpu", layout="page_first"
    )


def indexer_pool(anchor: Any, *, width: int = 8) -> Any:
    """SGLang's DSA indexer host pool beside the MLA pool ``anchor`` (its pages ride on the KV pages), over a CPU "device" pool.

    The device side is a namespace with the attributes the host pool reads of SGLang's
    ``DSATokenToKVPool`` (whose construction needs the model's whole DSA config).
    """
    device = SimpleNamespace(
        store_dtype=torch.uint8,
        start_layer=0,
        end_layer=LAYERS - 1,
        layer_num=LAYERS,
        device="cpu",
        layer_shard_enabled=False,
        index_k_with_scale_buffer=[torch.zeros(DEVICE_TOKENS, width, dtype=torch.uint8) for _ in range(LAYERS)],
    )
    decl = _decls.HostPoolDecl(
        pool_name=PoolName.INDEXER,
        device_pool=device,
        indices_from_pool=PoolName.KV,
        layout_source=PoolName.KV,
        storage_info=_decls.HostPoolStorageInfo(bytes_per_token_per_layer=width, dtype=torch.uint8),
        host_pool_builder=None,
    )
    return _dsa.DSAIndexerPoolHost(decl, anchor, pin_memory=False)


def fill_pool_random(pool: Any, seed: int) -> None:
    """Random bytes in every page of any host pool, through SGLang's own page copy (the pool's page ``p`` at token ``p * page_size``)."""
    generator = torch.Generator().manual_seed(seed)
    for page in range(int(pool.size) // int(pool.page_size)):
        flat = pool.get_data_page(page * pool.page_size, flat=True).contiguous().view(torch.uint8)
        pool.set_from_flat_data_page(
            page * pool.page_size,
            torch.randint(0, 256, (flat.numel(),), dtype=torch.uint8, generator=generator).view(
                pool.get_data_page(0, flat=True).dtype
            ),
        )


def hybrid_backend(kv: Any, config: HiCacheStorageConfig, sides: dict[str, Any]) -> KVContractHiCacheStorage:
    """The backend as SGLang's hybrid controller attaches it: the KV pool, then every pool of the group by name."""
    store = backend(kv, config)
    store.register_mem_host_pool_v2(kv, PoolName.KV)
    for name, pool in sides.items():
        store.register_mem_host_pool_v2(pool, PoolName(name))
    store.on_host_pools_registered()
    return store


def transfer(name: str, keys: list[str], host_indices: torch.Tensor | None, policy: str = "all_pages") -> Any:
    """SGLang's ``PoolTransfer`` of pool ``name``."""
    return PoolTransfer(name=PoolName(name), host_indices=host_indices, keys=keys, hit_policy=PoolHitPolicy(policy))


def split_page_bytes(pool: Any, token_index: int) -> bytes:
    """The bytes of a ``page_first_kv_split`` page starting at token ``token_index``: its page of each buffer, K, V, then the indexer's."""
    page = token_index // pool.page_size
    buffers = [pool.k_buffer, pool.v_buffer] + ([pool.index_k_buffer] if pool.index_k_buffer is not None else [])
    return b"".join(bytes(buffer[page].contiguous().view(torch.uint8).numpy()) for buffer in buffers)


def fill_split_random(pool: Any, seed: int) -> None:
    """Random bytes in every buffer of a ``page_first_kv_split`` pool."""
    generator = torch.Generator().manual_seed(seed)
    for buffer in (pool.k_buffer, pool.v_buffer, pool.index_k_buffer):
        if buffer is not None:
            flat = buffer.view(torch.uint8).view(-1)
            flat.copy_(torch.randint(0, 256, (flat.numel(),), dtype=torch.uint8, generator=generator))


def storage_config(
    root: Path,
    *,
    layout: str = "page_first",
    model: str = "org/model",
    tp_rank: int = 0,
    tp_size: int = 1,
    mla: bool = False,
    extra: dict[str, object] | None = None,
    tier: dict[str, object] | None = None,
) -> HiCacheStorageConfig:
    """SGLang's storage config as its controller builds it, with the dynamic backend's extra config naming kvcontract."""
    section: dict[str, object] = {"tier": tier or file_tier(root), "timeout_seconds": 5}
    config: HiCacheStorageConfig = importlib.import_module("sglang.srt.mem_cache.hicache_storage").HiCacheStorageConfig(
        tp_rank=tp_rank,
        tp_size=tp_size,
        pp_rank=0,
        pp_size=1,
        attn_cp_rank=0,
        attn_cp_size=1,
        is_mla_model=mla,
        enable_storage_metrics=True,
        is_page_first_layout=layout == "page_first",
        model_name=model,
        extra_config=extra_config(section) | (extra or {}),
    )
    return config


def file_tier(root: Path) -> dict[str, object]:
    """A file tier config under ``root``, big enough for every test."""
    return {"kind": "file", "path": str(root), "capacity": "4MiB"}


def extra_config(section: dict[str, object]) -> dict[str, object]:
    """SGLang's extra config of a dynamic backend naming kvcontract, with ``section`` as its ``kvcontract`` section."""
    return {
        "backend_name": "kvcontract",
        "module_path": "kvcontract.integrations.sglang",
        "class_name": "KVContractHiCacheStorage",
        "interface_v1": 1,
        "kvcontract": section,
    }


@contextlib.contextmanager
def one_gloo_rank(rendezvous: Path) -> Generator[None, None, None]:
    """A one-rank gloo group and SGLang's parallel context for a single rank, as its scheduler sets them."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=0, world_size=1)
    with _runtime.get_parallel().override(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_dcp_size=1, attn_dcp_rank=0):
        yield


def backend(pool: Any, config: HiCacheStorageConfig) -> KVContractHiCacheStorage:
    """The backend as SGLang's controller attaches it: the factory by module path, then the host pool."""
    built = _factory.StorageBackendFactory.create_backend("dynamic", config, pool)
    assert isinstance(built, KVContractHiCacheStorage)
    built.register_mem_pool_host(pool)
    return built


def fill_random(pool: Any, seed: int) -> None:
    """Random bytes in the whole host pool."""
    flat = pool.kv_buffer.view(torch.uint8).view(-1)
    flat.copy_(torch.randint(0, 256, (flat.numel(),), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed)))


def page_bytes(pool: Any, token_index: int) -> bytes:
    """The bytes of the page starting at token ``token_index``, through SGLang's own page view."""
    return bytes(pool.get_data_page(token_index, flat=True).contiguous().view(torch.uint8).numpy())


def keys_for(name: str, count: int) -> list[str]:
    """Page keys as SGLang makes them: SHA-256 hex digests of a page chain."""
    return [hashlib.sha256(f"{name}:{i}".encode()).hexdigest() for i in range(count)]


def pages_reach_a_new_instance(tmp_path: Path, layout: str, tier: dict[str, object], tier_type: type[object]) -> None:
    """Pages one backend on ``tier`` stores, a new instance loads byte-exact, and a backend of another model misses."""
    pool = mha_pool(layout)
    store = backend(pool, storage_config(tmp_path, layout=layout, tier=tier))
    assert isinstance(store.tier, tier_type)
    indices = pool.alloc(3 * PAGE)
    fill_random(pool, seed=21)
    keys = keys_for(f"{tier_type.__name__}-{layout}", 3)
    expected = [page_bytes(pool, int(indices[i * PAGE])) for i in range(3)]
    assert store.batch_set_v1(keys, indices) == [True] * 3
    store.close()
    again_pool = mha_pool(layout)
    again = backend(again_pool, storage_config(tmp_path, layout=layout, tier=tier))
    targets = again_pool.alloc(3 * PAGE)
    assert again.batch_exists(keys) == 3
    assert again.batch_get_v1(keys, targets) == [True] * 3
    assert [page_bytes(again_pool, int(targets[i * PAGE])) for i in range(3)] == expected
    stranger = backend(mha_pool(layout), storage_config(tmp_path, layout=layout, tier=tier, model="org/other"))
    assert stranger.batch_exists(keys) == 0
    again.close()
    stranger.close()
