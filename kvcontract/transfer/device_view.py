"""Pinned host memory seen as device tensors, so that kernels read and write it directly.

With unified addressing a pinned host pointer is also a device pointer; torch makes a
device tensor of it through the CUDA array interface. Whether kernels really reach the
memory is checked once on a scratch buffer before the engine relies on it.
"""

from __future__ import annotations

import logging

import torch

from kvcontract.transfer.host_buffer import HostBuffer

__all__ = ["device_alias", "on_device"]

_log = logging.getLogger(__name__)


def device_alias(rows: torch.Tensor, device: torch.device) -> torch.Tensor | None:
    """``rows`` (pinned host memory) as a tensor on ``device`` sharing its memory, or ``None``.

    First checked on a scratch buffer pinned the same way: a kernel writes a pattern
    through the device view and the host must read it back. The engine's blocks are
    never touched by the check.
    """
    if not rows.is_pinned():
        return None
    scratch = HostBuffer(1, 16, pin=True, device=device)
    try:
        probe = on_device(scratch.tensor, device) if scratch.pinned else None
        if probe is None:
            return None
        pattern = torch.arange(1, 17, dtype=torch.uint8, device=device).view(1, 16)
        probe.index_copy_(0, torch.zeros(1, dtype=torch.int64, device=device), pattern)
        torch.cuda.synchronize(device)
        if not torch.equal(scratch.tensor, pattern.cpu()):
            return None
        return on_device(rows, device)
    except (RuntimeError, TypeError, ValueError) as error:
        _log.info("host memory not addressable from %s (%s); copying with memcpy", device, error)
        return None
    finally:
        scratch.close()


def on_device(host: torch.Tensor, device: torch.device) -> torch.Tensor | None:
    """A ``device`` tensor over the (pinned, contiguous) memory of ``host``, if torch makes one.

    The view does not keep ``host`` alive: the caller holds ``host`` while kernels use it.
    """
    flat = torch.as_tensor(_CudaArray(host.data_ptr(), host.numel() * host.itemsize))
    if flat.device != device or flat.data_ptr() != host.data_ptr():
        return None
    return flat.view(host.dtype).view(host.shape)


class _CudaArray:
    """Device-addressable memory described by the CUDA array interface, for ``torch.as_tensor``."""

    def __init__(self, pointer: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (pointer, False),
            "strides": None,
            "version": 2,
        }
