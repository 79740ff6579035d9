"""Fixtures of the tier tests: host buffers, keys, tiers that shut down after the test, job draining."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Protocol, TypeVar

import pytest
import torch

from kvcontract import (
    BlockIdentity,
    CachePolicy,
    LookupResult,
    OffloadKey,
    SecondaryTier,
    TransferResult,
    make_offload_key,
)
from kvcontract.testing import example_identity
from kvcontract.tiers import FileTier

T = TypeVar("T")
BLOCK_BYTES = 4096
HOST_BLOCKS = 16
IDENTITY = example_identity(BLOCK_BYTES)
FINGERPRINT = IDENTITY.fingerprint
"""The identity of the tiers over the default host buffer, and what their block files carry."""
WRITE_BLOCK = "kvcontract.tiers.file.tier.write_block"
READ_BLOCK = "kvcontract.tiers.file.tier.read_block"
DELETE_BLOCK = "kvcontract.tiers.file.tier.delete_block"
"""Where the file tier looks up its block I/O functions: the targets of fault injection."""
_DRAIN_LIMIT_S = 60.0
"""Guard against a hang only: jobs finish in milliseconds."""
HANG_LIMIT_S = 10.0
"""How long a call that must not hang may take before the test fails (it takes milliseconds)."""

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="giving a directory to another user or making a device node needs root"
)


class MakeTier(Protocol):
    """Builds a file tier that records events; unset arguments default to the test's root and host buffer."""

    def __call__(
        self,
        capacity: int = 8,
        *,
        root: Path | None = None,
        host_blocks: torch.Tensor | None = None,
        policy: str | CachePolicy = "lru",
        io_threads: int = 4,
        enable_events: bool = True,
        identity: BlockIdentity | None = None,
        integrity_key: bytes | None = None,
    ) -> FileTier: ...


def key(i: int) -> OffloadKey:
    """The ``i``-th test key."""
    return make_offload_key(i.to_bytes(8, "big") * 4)


def pattern(seed: int, nbytes: int = BLOCK_BYTES) -> torch.Tensor:
    """Deterministic random bytes for block content number ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=generator)


def settle(tier: SecondaryTier, key_: OffloadKey) -> LookupResult:
    """Look ``key_`` up until the answer is no longer ``RETRY`` (a remote tier's lookup batch landed)."""
    deadline = time.monotonic() + _DRAIN_LIMIT_S
    while True:
        answer = tier.lookup(key_)
        if answer is not LookupResult.RETRY:
            return answer
        assert time.monotonic() < deadline, "a lookup stayed RETRY"
        time.sleep(0.0005)


def drain(tier: SecondaryTier, job_ids: Collection[int]) -> dict[int, TransferResult]:
    """Poll ``tier`` until every job of ``job_ids`` is reported; each must be reported once."""
    results: dict[int, TransferResult] = {}
    deadline = time.monotonic() + _DRAIN_LIMIT_S
    while len(results) < len(job_ids):
        for result in tier.get_finished():
            assert result.job_id in job_ids, f"unexpected job {result.job_id}"
            assert result.job_id not in results, f"job {result.job_id} reported twice"
            results[result.job_id] = result
        assert time.monotonic() < deadline, f"jobs {set(job_ids) - set(results)} never finished"
        time.sleep(0.001)
    return results


def finishes(call: Callable[[], T], limit_s: float = HANG_LIMIT_S) -> T:
    """The result of ``call``, run on a thread; fails the test, rather than hanging it, past ``limit_s``."""
    outcome: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"{call} still runs after {limit_s} s: it hangs"
    if errors:
        raise errors[0]
    return outcome[0]


class Gate:
    """Holds the threads that call a wrapped function until opened; counts who entered."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self.entered = threading.Semaphore(0)

    def wrap(self, fn: Callable[..., None]) -> Callable[..., None]:
        """``fn``, but waiting for :meth:`open` first."""

        def gated(*args: object, **kwargs: object) -> None:
            self.entered.release()
            assert self._open.wait(_DRAIN_LIMIT_S), "gate never opened"
            fn(*args, **kwargs)

        return gated

    def wait_entered(self) -> None:
        """Block until one more thread has reached the gate."""
        assert self.entered.acquire(timeout=_DRAIN_LIMIT_S), "no thread reached the gate"

    def open(self) -> None:
        """Let every waiting and later caller through."""
        self._open.set()


@pytest.fixture
def host() -> torch.Tensor:
    """A zeroed host buffer of ``HOST_BLOCKS`` blocks of ``BLOCK_BYTES`` bytes."""
    return torch.zeros((HOST_BLOCKS, BLOCK_BYTES), dtype=torch.uint8)


@pytest.fixture
def job_ids() -> Iterator[int]:
    """Fresh job ids."""
    return itertools.count(1)


@pytest.fixture
def make_tier(tmp_path: Path, host: torch.Tensor) -> Iterator[MakeTier]:
    """Builds tiers (on ``tmp_path/cache`` over ``host`` by default); shuts them down after the test."""
    tiers: list[FileTier] = []

    def make(
        capacity: int = 8,
        *,
        root: Path | None = None,
        host_blocks: torch.Tensor | None = None,
        policy: str | CachePolicy = "lru",
        io_threads: int = 4,
        enable_events: bool = True,
        identity: BlockIdentity | None = None,
        integrity_key: bytes | None = None,
    ) -> FileTier:
        blocks = host if host_blocks is None else host_blocks
        tier = FileTier(
            tmp_path / "cache" if root is None else root,
            capacity,
            blocks,
            identity=identity if identity is not None else example_identity(int(blocks.shape[-1])),
            policy=policy,
            io_threads=io_threads,
            enable_events=enable_events,
            integrity_key=integrity_key,
        )
        tiers.append(tier)
        return tier

    yield make
    for tier in tiers:
        tier.shutdown()
