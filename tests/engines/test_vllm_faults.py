"""Faults of a tier inside vLLM's engine cost recomputation, never a hang and never a wrong token.

The engine runs its prompts once with a tier below 16 blocks of host memory; between the passes
the test breaks the tier (a Redis stopped with SIGSTOP, as a stuck VM or a long fork leaves it;
a Mooncake master killed); the second pass must finish within the run's bound, every token as the
engine's own without offloading.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tests.engines.support import EngineRun, Pass, TinyModel, differing, run_engine, shared_prefix_prompts
from tests.engines.test_vllm_tiers import tiering
from tests.tiers.mooncake.support import store_or_skip
from tests.tiers.redis.support import lru_server_or_skip

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
