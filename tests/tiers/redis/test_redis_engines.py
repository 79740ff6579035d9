"""Two simulated engines with their own host memory share one Redis: each loads, byte for byte, blocks the other stored."""

from __future__ import annotations

from kvcontract.config import load_config
from kvcontract.sim.multi_engine import run_engines
from kvcontract.sim.workload import conversation_workload
from tests.tiers.redis.support import RedisServer, redis_config


def test_engines_hit_blocks_the_other_engine_stored(redis_server: RedisServer) -> None:
    config = load_config(base=redis_config(redis_server.url, "engines"))
    report = run_engines(config, conversation_workload(300, 0), engines=2)
    assert report.requests == 300 and len(report.engines) == 2
    assert report.failed_loads == 0 and report.failed_stores == 0
    assert report.verified_blocks > 0
    promoted = [sum(tier.promoted for tier in engine.tiers) for engine in report.engines]
    assert all(count > 0 for count in promoted), "each engine loads blocks from the shared Redis"
    alone = run_engines(
        load_config(base=redis_config(redis_server.url, "alone")), conversation_workload(300, 0)[0::2], 1
    )
    assert report.engines[0].hit_ratio > alone.hit_ratio, "sharing helps the engine that served the same requests"
