"""The CPU stand-ins for what CUDA provides, all in one place; SGLang's own modules are used as they are.

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
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import sys
import types
from collections.abc import Generator, Sequence

import pytest
import torch
from typing_extensions import override

__all__ = ["install_stand_ins", "radix_cache_stand_ins"]

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
