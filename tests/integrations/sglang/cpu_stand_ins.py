"""The CPU stand-ins for what CUDA provides, all in one place; SGLang's own modules are used as they are.

- torchvision: SGLang's config package imports ``torchvision.transforms`` for its vision
  models; torchvision's wheel does not load on the CPU torch, and HiCache never calls it, so
  an empty module answers the import (and says version 0.0, so transformers takes no
  torchvision path).
- pinned host memory: ``cudaHostRegister`` needs a GPU; the host pools are built with
  SGLang's own ``pin_memory=False``, so nothing stands in for it here.
- the device<->host copy kernels of ``sgl_kernel``: not needed by these tests, which drive
  the storage layer (host pool <-> tier) with SGLang's real host pools and backend factory.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types

from typing_extensions import override

__all__ = ["install_stand_ins"]

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
