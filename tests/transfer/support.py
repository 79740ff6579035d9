"""Shared helpers for the transfer tests: backends to run on, KV tensors, and the reference model.

The reference model is written from the documented host layout alone: host row
``host_block * k + j`` holds one GPU block of one group, its planes' bytes back to back
(each tensor in order, K before V with ``kv_first``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest
import torch
from hypothesis import strategies as st

from kvcontract.transfer import TorchOffloadingWorker
from kvcontract.transfer.run_copy import compiled_copy_runs
from tests.required_parts import required

__all__ = [
    "BACKENDS",
    "assert_loaded",
    "Backend",
    "CPU_BACKENDS",
    "NEEDS_COMPILED_LOOP",
    "GroupShape",
    "Scenario",
    "block_bytes",
    "expected_host",
    "host_expected_after_store",
    "random_kv",
    "row_bytes",
    "same_bytes",
    "scenario_kv",
    "scenarios",
]


@dataclass(frozen=True)
class Backend:
    """Where the KV caches live, for CUDA whether kernels copy straight to host memory, and
    for the CPU whether the compiled loop copies."""

    device: str
    zero_copy: bool | None = None
    compiled_loop: bool | None = None

    def worker(
        self,
        kv: Sequence[torch.Tensor] | Sequence[Sequence[torch.Tensor]],
        *,
        num_host_blocks: int,
        k: int = 1,
        kv_first: bool = False,
        shared_memory_path: str | None = None,
    ) -> TorchOffloadingWorker:
        """A worker over ``kv`` copying the way this backend says."""
        return TorchOffloadingWorker(
            kv,
            num_host_blocks=num_host_blocks,
            blocks_per_offload_block=k,
            kv_first=kv_first,
            shared_memory_path=shared_memory_path,
            cuda_zero_copy=self.zero_copy,
            cpu_compiled_loop=self.compiled_loop,
        )


NEEDS_COMPILED_LOOP = pytest.mark.skipif(
    compiled_copy_runs is None and not required("compiled"),
    reason="kvcontract's compiled copy loop was not built (no C compiler at install); "
    "KVCONTRACT_REQUIRE=compiled makes this a failure",
)
"""Skips without the compiled copy loop, unless ``KVCONTRACT_REQUIRE=compiled`` (CI) runs the test to fail."""

_NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

CPU_BACKENDS = [
    pytest.param(Backend("cpu", compiled_loop=True), id="cpu", marks=NEEDS_COMPILED_LOOP),
    pytest.param(Backend("cpu", compiled_loop=False), id="cpu-python-loop"),
]

BACKENDS = [
    *CPU_BACKENDS,
    pytest.param(Backend("cuda", zero_copy=True), id="cuda-zero-copy", marks=_NO_CUDA),
    pytest.param(Backend("cuda", zero_copy=False), id="cuda-memcpy", marks=_NO_CUDA),
]


@dataclass(frozen=True)
class GroupShape:
    """The tensors of one KV-cache group: ``layers`` tensors of ``num_blocks`` blocks."""

    layers: int
    num_blocks: int
    block_shape: tuple[int, ...]
    dtype: torch.dtype


def random_kv(shape: GroupShape, *, kv_first: bool, device: str, generator: torch.Generator) -> list[torch.Tensor]:
    """Per-layer tensors of ``shape`` filled with random bytes (any bit pattern, NaNs included)."""
    dims = (2, shape.num_blocks) if kv_first else (shape.num_blocks,)
    full = (*dims, *shape.block_shape)
    item = torch.empty(0, dtype=shape.dtype).element_size()
    tensors: list[torch.Tensor] = []
    for _ in range(shape.layers):
        size = (*full[:-1], full[-1] * item)
        raw = torch.randint(0, 256, size, dtype=torch.uint8, generator=generator)
        tensors.append(raw.view(shape.dtype).to(device))
    return tensors


def block_bytes(tensors: Sequence[torch.Tensor], block: int, *, kv_first: bool) -> torch.Tensor:
    """The bytes of GPU block ``block`` across ``tensors``, in host order (K before V), on CPU."""
    planes = [half for t in tensors for half in ((t[0], t[1]) if kv_first else (t,))]
    return torch.cat([plane[block].reshape(-1).view(torch.uint8).cpu() for plane in planes])


def row_bytes(groups: Sequence[Sequence[torch.Tensor]], *, kv_first: bool) -> int:
    """Bytes of one host row: the largest group's GPU block."""
    return max(block_bytes(tensors, 0, kv_first=kv_first).numel() for tensors in groups)


def expected_host(
    before: torch.Tensor,
    groups: Sequence[Sequence[torch.Tensor]],
    *,
    kv_first: bool,
    k: int,
    sizes: Sequence[int],
    starts: Sequence[int],
    gpu_ids: Sequence[int],
    host_ids: Sequence[int],
) -> torch.Tensor:
    """The host buffer ``before`` after storing ``gpu_ids`` to ``host_ids``: the reference model."""
    width = row_bytes(groups, kv_first=kv_first)
    host = before.clone().view(-1, width)
    gpu_at = host_at = 0
    for tensors, size, start in zip(groups, sizes, starts):
        for i, block in enumerate(gpu_ids[gpu_at : gpu_at + size]):
            position = start + i
            row = host_ids[host_at + position // k] * k + position % k
            data = block_bytes(tensors, block, kv_first=kv_first)
            host[row, : data.numel()] = data
        gpu_at += size
        host_at += -(-(start + size) // k) if size else 0
    return host.view(before.shape)


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors hold the same bytes (``torch.equal`` says NaN != NaN)."""
    return torch.equal(a.reshape(-1).view(torch.uint8).cpu(), b.reshape(-1).view(torch.uint8).cpu())


DTYPES = (torch.float32, torch.bfloat16, torch.int8, torch.float16)


@dataclass(frozen=True)
class Scenario:
    """One store job and the load job that brings the same blocks back to other GPU blocks."""

    kv_first: bool
    k: int
    groups: tuple[GroupShape, ...]
    sizes: tuple[int, ...]
    starts: tuple[int, ...]
    stored: tuple[int, ...]
    loaded: tuple[int, ...]
    host_ids: tuple[int, ...]
    num_host_blocks: int
    seed: int


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """Random layouts, k, groups (some empty), unaligned starts and block mappings."""
    k = draw(st.sampled_from((1, 3)))
    groups = tuple(
        GroupShape(
            layers=draw(st.integers(1, 2)),
            num_blocks=draw(st.integers(1, 9)),
            block_shape=draw(st.sampled_from(((4,), (2, 3), (3, 2, 2)))),
            dtype=draw(st.sampled_from(DTYPES)),
        )
        for _ in range(draw(st.integers(1, 2)))
    )
    sizes = tuple(draw(st.integers(0, group.num_blocks)) for group in groups)
    starts = tuple(draw(st.integers(0, k - 1)) for _ in groups)
    stored: list[int] = []
    loaded: list[int] = []
    for group, size in zip(groups, sizes):
        stored += draw(st.lists(st.integers(0, group.num_blocks - 1), min_size=size, max_size=size))
        loaded += draw(st.permutations(range(group.num_blocks)))[:size]
    needed = sum(-(-(start + size) // k) if size else 0 for size, start in zip(sizes, starts))
    num_host_blocks = needed + draw(st.integers(0 if needed else 1, 3))
    host_ids = draw(st.permutations(range(num_host_blocks)))[:needed]
    return Scenario(
        kv_first=draw(st.booleans()),
        k=k,
        groups=groups,
        sizes=sizes,
        starts=starts,
        stored=tuple(stored),
        loaded=tuple(loaded),
        host_ids=tuple(host_ids),
        num_host_blocks=num_host_blocks,
        seed=draw(st.integers(0, 2**31)),
    )


def host_expected_after_store(
    before: torch.Tensor, source: Sequence[Sequence[torch.Tensor]], scenario: Scenario
) -> torch.Tensor:
    """The host buffer ``before`` after the scenario's store from ``source``."""
    return expected_host(
        before,
        source,
        kv_first=scenario.kv_first,
        k=scenario.k,
        sizes=scenario.sizes,
        starts=scenario.starts,
        gpu_ids=scenario.stored,
        host_ids=scenario.host_ids,
    )


def assert_loaded(
    target: Sequence[Sequence[torch.Tensor]],
    target_before: Sequence[Sequence[torch.Tensor]],
    source: Sequence[Sequence[torch.Tensor]],
    scenario: Scenario,
) -> None:
    """After the scenario's load, each loaded block of ``target`` holds the stored source
    block, and every other block is as it was."""
    at = 0
    for g, size in enumerate(scenario.sizes):
        moved = dict(zip(scenario.loaded[at : at + size], scenario.stored[at : at + size]))
        for block in range(scenario.groups[g].num_blocks):
            kv_first = scenario.kv_first
            want = (
                block_bytes(source[g], moved[block], kv_first=kv_first)
                if block in moved
                else block_bytes(target_before[g], block, kv_first=kv_first)
            )
            got = block_bytes(target[g], block, kv_first=kv_first)
            assert torch.equal(got, want), f"group {g} block {block}"
        at += size


def scenario_kv(scenario: Scenario, device: str, generator: torch.Generator) -> list[list[torch.Tensor]]:
    """Random KV tensors for every group of ``scenario``."""
    return [
        random_kv(shape, kv_first=scenario.kv_first, device=device, generator=generator) for shape in scenario.groups
    ]
