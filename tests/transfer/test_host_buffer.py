"""The host buffer: one allocation, pinning with a one-warning fallback, shared-memory mapping."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from kvcontract.transfer import HostBuffer


def test_a_pageable_buffer_is_one_writable_tensor_of_blocks() -> None:
    buffer = HostBuffer(6, 40, pin=False)
    assert buffer.tensor.shape == (6, 40) and buffer.tensor.dtype == torch.uint8
    assert not buffer.pinned and buffer.shared_memory_path is None
    buffer.tensor[5].fill_(7)
    assert int(buffer.tensor.view(-1)[-1]) == 7


@pytest.mark.skipif(torch.cuda.is_available(), reason="pinning works where CUDA is present")
def test_failed_pinning_warns_once_and_falls_back_to_pageable_memory() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        buffer = HostBuffer(4, 16, pin=True)
    assert [w.category for w in caught] == [RuntimeWarning]
    assert "pageable memory" in str(caught[0].message)
    assert not buffer.pinned and buffer.tensor.shape == (4, 16)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_buffer_is_pinned_when_cuda_is_present() -> None:
    assert HostBuffer(4, 16, pin=True).pinned


def test_buffers_on_one_shared_memory_path_see_the_same_bytes(tmp_path: Path) -> None:
    path = str(tmp_path / "kv-host")
    first = HostBuffer(3, 32, pin=False, shared_memory_path=path)
    second = HostBuffer(3, 32, pin=False, shared_memory_path=path)
    first.tensor[1].copy_(torch.arange(32, dtype=torch.uint8))
    assert torch.equal(second.tensor[1], torch.arange(32, dtype=torch.uint8))
    assert second.shared_memory_path == path and Path(path).stat().st_size == 96


def test_a_shared_file_of_another_geometry_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "kv-host")
    HostBuffer(3, 32, pin=False, shared_memory_path=path)
    with pytest.raises(ValueError, match="holds 96 bytes, this host buffer needs 128"):
        HostBuffer(4, 32, pin=False, shared_memory_path=path)


@pytest.mark.parametrize(("blocks", "size"), [(0, 8), (2, 0)])
def test_an_empty_buffer_is_refused(blocks: int, size: int) -> None:
    with pytest.raises(ValueError, match="at least"):
        HostBuffer(blocks, size, pin=False)
