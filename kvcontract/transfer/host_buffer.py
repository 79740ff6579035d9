"""Host memory for the offload blocks: allocated once, pinned for fast device copies, shareable.

The buffer is mapped memory (anonymous, or with a shared-memory path a file mapped
``MAP_SHARED``, for example under ``/dev/shm``, so several processes map one region),
asked for huge pages, which random block copies benefit from. To pin it, it is
page-locked in place with ``cudaHostRegister``: the GPU then copies at full bus speed
and, with unified addressing, kernels can address it. Where registering fails, an
anonymous buffer is allocated again from torch's pinned allocator instead (which rounds
sizes up to a power of two, hence not the first choice). If neither pins, the buffer
stays pageable, with one warning.

Registration runs on a short-lived helper thread: the CUDA runtime keeps the last error
per thread, and a refused registration left there would fail the next torch call that
checks it. A registration ends with ``close()`` or, at the latest, when the mapping is
collected, so a later mapping at the same address can be registered again.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any, cast

import torch

__all__ = ["HostBuffer"]


class HostBuffer:
    """``num_blocks`` host blocks of ``block_bytes`` bytes each, as one uint8 tensor."""

    def __init__(
        self,
        num_blocks: int,
        block_bytes: int,
        *,
        pin: bool,
        shared_memory_path: str | None = None,
        device: torch.device | None = None,
    ) -> None:
        """``device``: the CUDA device the buffer is pinned for (default: the current one)."""
        if num_blocks < 1:
            raise ValueError(f"num_host_blocks must be at least 1, got {num_blocks}")
        if block_bytes < 1:
            raise ValueError(f"host blocks must hold at least one byte, got {block_bytes}")
        self._path = shared_memory_path
        nbytes = num_blocks * block_bytes
        region, flat = _mapped(nbytes, shared_memory_path)
        self._unregister: weakref.finalize[[int, int], mmap.mmap] | None = None
        self._pinned = False
        if pin:
            failures: list[str] = []
            index = _register(flat, device, failures)
            if index is not None:
                self._unregister = weakref.finalize(region, _unregister, flat.data_ptr(), index)
                self._unregister.atexit = False  # the process's end releases pinned pages
                self._pinned = True
            if not self._pinned and shared_memory_path is None:
                pinned = _torch_pinned(nbytes, failures)
                if pinned is not None:
                    flat, self._pinned = pinned, True
            if not self._pinned:
                warnings.warn(
                    f"could not pin the host buffer ({'; '.join(failures)}); using pageable "
                    "memory, which makes GPU<->host copies slower and synchronous",
                    RuntimeWarning,
                    stacklevel=3,
                )
        self._tensor = flat.view(num_blocks, block_bytes)

    @property
    def tensor(self) -> torch.Tensor:
        """The buffer, ``(num_blocks, block_bytes)`` uint8: row ``b`` is host block ``b``."""
        return self._tensor

    @property
    def pinned(self) -> bool:
        """Whether the buffer is page-locked for device copies."""
        return self._pinned

    @property
    def shared_memory_path(self) -> str | None:
        """The file backing the buffer, if it is shared."""
        return self._path

    def close(self) -> None:
        """Unpin memory registered in place (it stays usable, pageable); a shared file stays."""
        if self._unregister is not None and self._unregister.alive:
            self._pinned = False
            self._unregister()


def _mapped(nbytes: int, path: str | None) -> tuple[mmap.mmap, torch.Tensor]:
    if path is None:
        region = mmap.mmap(-1, nbytes)
    else:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                os.ftruncate(fd, nbytes)
            elif size != nbytes:
                raise ValueError(
                    f"shared memory file {path} holds {size} bytes, this host buffer needs "
                    f"{nbytes} (num_host_blocks x bytes per offload block): map it with the same "
                    "geometry, or remove the file"
                )
            region = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED)
        finally:
            os.close(fd)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        with contextlib.suppress(OSError):  # huge pages are only a speed-up; some kernels and file systems refuse them
            region.madvise(mmap.MADV_HUGEPAGE)
    return region, torch.frombuffer(region, dtype=torch.uint8)


def _register(flat: torch.Tensor, device: torch.device | None, failures: list[str]) -> int | None:
    """Page-lock ``flat`` in place with ``cudaHostRegister`` for ``device``; its index, or
    ``None`` having said why in ``failures``."""
    try:
        index = device.index if device is not None else None
        if index is None:
            index = torch.cuda.current_device()
        register = _cudart().cudaHostRegister
        _on_helper_thread(lambda: register(flat.data_ptr(), flat.numel(), 0), index)
    except (RuntimeError, AssertionError) as error:
        failures.append(f"cudaHostRegister: {error}")
        return None
    return index


def _unregister(pointer: int, device: int) -> None:
    """End the registration at ``pointer``; a refusal (the mapping already gone) changes nothing."""
    with contextlib.suppress(RuntimeError):  # the mapping may already be gone; nothing is pinned in vain either way
        _on_helper_thread(lambda: _cudart().cudaHostUnregister(pointer), device)


def _on_helper_thread(call: Callable[[], int], device: int) -> None:
    """Run a CUDA runtime ``call`` on its own thread with ``device`` current (so that no
    context is made on another device), raising its error here if it fails."""
    outcome: list[Exception | None] = []

    def run() -> None:
        try:
            torch.cuda.set_device(device)
            torch.cuda.check_error(call())
        except Exception as error:  # handed to the calling thread below
            outcome.append(error)
        else:
            outcome.append(None)

    helper = threading.Thread(target=run, name="kvcontract-cuda-register")
    helper.start()
    helper.join()
    if outcome[0] is not None:
        raise outcome[0]


def _torch_pinned(nbytes: int, failures: list[str]) -> torch.Tensor | None:
    try:
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    except RuntimeError as error:
        failures.append(f"pinned allocation: {error}")
        return None


def _cudart() -> Any:
    """torch's binding of the CUDA runtime (``cudaHostRegister``...), which torch leaves untyped."""
    # torch leaves cudart() unannotated
    return cast(Any, torch.cuda.cudart())  # type: ignore[no-untyped-call]
