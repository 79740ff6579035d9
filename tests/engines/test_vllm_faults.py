"""Faults of a tier inside vLLM's engine cost recomputation, never a hang and never a wrong token.

The engine runs its prompts once with a tier below 16 blocks of host memory; between the passes
the test breaks the tier (a Redis stopped with SIGSTOP, as a stuck VM or a long fork leaves it;
a Mooncake master killed; a Redis that answers slowly), or the tier's disk is full from the
start (a small tmpfs); every pass must finish within the run's bound, every token as the
engine's own without offloading, and the failures show in vLLM's counters.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.engines.support import (
    STORED,
    EngineRun,
    Pass,
    TinyModel,
    differing,
    run_engine,
    shared_prefix_prompts,
)
from tests.engines.test_vllm_tiers import HOST_BLOCKS, tiering
from tests.tiers.mooncake.support import store_or_skip
from tests.tiers.redis.support import RedisServer, lru_server_or_skip

PROMPTS = shared_prefix_prompts()
FAULT_PASS_LIMIT_S = 120.0
"""The second pass with the tier broken: seconds of recomputation at most (it takes 5-20 s here)."""


FAILED_JOBS = ("vllm:kv_offload_tiering_promotion_job_failures", "vllm:kv_offload_tiering_cascade_job_failures")
"""vLLM's counters of the tier jobs that failed: where the fault shows."""


def assert_fault_costs_recomputation(
    run: EngineRun, workdir: Path, reference: list[Pass], break_tier: Callable[[], None]
) -> None:
    """Run ``run``, breaking its tier between the passes: every token as without offloading, the
    broken pass within its bound, and the fault in vLLM's counters."""
    broken: list[float] = []

    def between(_: int) -> None:
        break_tier()
        broken.append(time.monotonic())

    passes = run_engine(run, workdir, between=between)
    seconds = time.monotonic() - broken[0]
    for number, (got, want) in enumerate(zip(passes, reference, strict=True)):
        assert differing(got.tokens, want.tokens) == [], (
            f"pass {number}: outputs differ from the engine without offloading"
        )
    assert seconds < FAULT_PASS_LIMIT_S, f"the pass with the tier broken took {seconds:.0f} s"
    before, after = passes
    assert sum(after.counter(name) - before.counter(name) for name in FAILED_JOBS) > 0, "no tier job failed"


def test_a_redis_frozen_between_passes_costs_recomputation_not_a_hang_or_a_wrong_token(
    tiny_model: tuple[TinyModel, Path],
    without_offloading: Callable[[EngineRun], list[Pass]],
    tmp_path: Path,
    shm: Path,
) -> None:
    model, path = tiny_model
    server = lru_server_or_skip(tmp_path / "redis")
    tier = {"kind": "redis", "url": server.url, "socket_timeout": 1.0, "job_deadline": 5.0}
    run = EngineRun(str(path), tiering(model, shm, tier), [PROMPTS, PROMPTS])
    try:
        assert_fault_costs_recomputation(run, tmp_path / "engine", without_offloading(run), server.freeze)
    finally:
        server.thaw()
        server.stop()


def test_a_mooncake_master_killed_between_passes_costs_recomputation_not_a_hang_or_a_wrong_token(
    tiny_model: tuple[TinyModel, Path],
    without_offloading: Callable[[EngineRun], list[Pass]],
    tmp_path: Path,
    shm: Path,
) -> None:
    model, path = tiny_model
    store = store_or_skip(tmp_path / "mooncake")
    run = EngineRun(str(path), tiering(model, shm, {**store.tier_config(), "job_deadline": 5.0}), [PROMPTS, PROMPTS])
    try:
        assert_fault_costs_recomputation(run, tmp_path / "engine", without_offloading(run), store.stop)
    finally:
        store.close()


def test_a_file_tier_on_a_full_disk_costs_recomputation_not_a_hang_or_a_wrong_token(
    tiny_model: tuple[TinyModel, Path],
    without_offloading: Callable[[EngineRun], list[Pass]],
    tmp_path: Path,
    shm: Path,
    small_disk: Path,
) -> None:
    """The tier's root lies on a tmpfs of 512 KiB: about 15 of the 48 blocks fit, the other writes fail."""
    model, path = tiny_model
    tier = {"kind": "file", "path": str(small_disk / "tier"), "capacity": 256}
    run = EngineRun(str(path), tiering(model, shm, tier), [PROMPTS, PROMPTS])
    assert_fault_costs_recomputation(run, tmp_path / "engine", without_offloading(run), lambda: None)


def test_a_slow_redis_costs_recomputation_not_a_hang_or_a_wrong_token(
    tiny_model: tuple[TinyModel, Path],
    without_offloading: Callable[[EngineRun], list[Pass]],
    tmp_path: Path,
    shm: Path,
) -> None:
    """From the second pass on, Redis holds every command for 0.8 s of each 0.85 (CLIENT PAUSE): calls answer,
    late; jobs past their 0.5 s deadline fail and their blocks are recomputed."""
    model, path = tiny_model
    server = lru_server_or_skip(tmp_path / "redis")
    tier = {"kind": "redis", "url": server.url, "socket_timeout": 5.0, "job_deadline": 0.5}
    run = EngineRun(str(path), tiering(model, shm, tier), [PROMPTS, PROMPTS])
    slow = _SlowRedis(server)
    try:
        assert_fault_costs_recomputation(run, tmp_path / "engine", without_offloading(run), slow.start)
    finally:
        slow.stop()
        server.stop()


def test_a_frozen_redis_holds_no_host_memory_hostage(
    tiny_model: tuple[TinyModel, Path], tmp_path: Path, shm: Path
) -> None:
    """With Redis frozen for the second pass (new prompts), the engine goes on saving blocks to host memory.

    Before the breaker failed queued jobs at once, copies waiting on the frozen server held host
    blocks until each timed out: 320 failed allocations against 10 with the server healthy. Copies
    in flight when it froze still hold theirs until their call times out, so the tiering manager's
    ``cascade_share`` bounds what they may pin together.
    """
    healthy = _second_pass(tiny_model, tmp_path / "healthy", shm, freeze=False)
    frozen = _second_pass(tiny_model, tmp_path / "frozen", shm, freeze=True)
    assert frozen.tokens == healthy.tokens
    seen = {name: (frozen.counter(name), healthy.counter(name)) for name in (STORED, ALLOCATION_FAILURES, QUERIES)}
    print("second pass, frozen against healthy:", seen)
    stored, stored_healthy = seen[STORED]
    assert stored > stored_healthy / 2, (
        f"host memory took {stored:g} bytes with the tier frozen, {stored_healthy:g} healthy"
    )
    failures, failures_healthy = seen[ALLOCATION_FAILURES]
    assert failures <= HOSTAGE_BOUND, (
        f"{failures:g} failed allocations with the tier frozen ({failures_healthy:g} healthy)"
    )


def _second_pass(tiny_model: tuple[TinyModel, Path], workdir: Path, shm: Path, *, freeze: bool) -> Pass:
    """The second of two passes (the shared prompts, then new ones) on a Redis of its own, frozen between them if told:
    its tokens, and what each counter gained in it."""
    model, path = tiny_model
    server = lru_server_or_skip(workdir / "redis")
    tier = {"kind": "redis", "url": server.url, "socket_timeout": 1.0, "job_deadline": 5.0}
    offloading = tiering(model, shm, tier)
    offloading["kvcontract"]["manager"]["cascade_share"] = CASCADE_SHARE
    run = EngineRun(str(path), offloading, [PROMPTS, shared_prefix_prompts(seed=2)])

    def between(_: int) -> None:
        if freeze:
            server.freeze()

    try:
        first, second = run_engine(run, workdir / "engine", between=between)
    finally:
        server.thaw()
        server.stop()
    return Pass(second.tokens, {name: second.counter(name) - first.counter(name) for name in second.counters})


ALLOCATION_FAILURES = "vllm:kv_offload_allocation_failure"
"""vLLM's count of the stores host memory had no room for."""
QUERIES = "vllm:kv_offload_tiering_chunk_queries"
"""vLLM's count of the lookups that reached the tier."""
CASCADE_SHARE = 0.25
"""Of host memory, what the copies to the tier may pin together: vLLM asks for a request's 9 blocks at
once, which the 12 left to it hold."""
HOSTAGE_BOUND = HOST_BLOCKS
"""Failed allocations a frozen tier may cost the pass. Measured with the copies free to pin all of host
memory: 16 and 104 (and 12 of 48 blocks stored) against 0-10 with the tier healthy; with a share of
0.25: 0, every block stored."""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 512 KiB mounted for the test (root only), unmounted after it."""
    point = tmp_path / "disk"
    point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", str(point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"need to mount a small tmpfs (root with CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    yield point
    subprocess.run(["umount", "--lazy", str(point)], check=False)


class _SlowRedis:
    """Holds every command of a Redis server for 0.8 s of each 0.85 s (``CLIENT PAUSE``) until stopped."""

    def __init__(self, server: RedisServer) -> None:
        self._client = server.client(socket_timeout=5.0)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._pause, name="slow-redis", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        self._client.close()

    def _pause(self) -> None:
        while not self._stopped.is_set():
            self._client.execute_command("CLIENT", "PAUSE", 800, "ALL")
            self._stopped.wait(0.85)
