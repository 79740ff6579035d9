"""Two simulated engines with their own host memory share one Mooncake Store: each loads, byte for byte, blocks the other stored."""

from __future__ import annotations

from kvcontract.config import load_config
from kvcontract.sim.multi_engine import run_engines
from kvcontract.sim.workload import conversation_workload
from tests.tiers.mooncake.support import MooncakeStore


def test_engines_hit_blocks_the_other_engine_stored(mooncake_store: MooncakeStore) -> None:
    report = run_engines(
        load_config(base=mooncake_store.simulation_config("engines")), conversation_workload(300, 0), engines=2
    )
    assert report.requests == 300 and len(report.engines) == 2
    assert report.failed_loads == 0 and report.failed_stores == 0
    assert report.verified_blocks > 0
    promoted = [sum(tier.promoted for tier in engine.tiers) for engine in report.engines]
    assert all(count > 0 for count in promoted), "each engine loads blocks from the shared store"
