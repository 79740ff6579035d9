"""The Grafana dashboard in docs/ queries only series that kvcontract exposes, by their exposed names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from kvcontract.config import WhatIfConfig
from kvcontract.managers import CPUOffloadingManager, TieringOffloadingManager
from kvcontract.metrics import MeteredWorker, MetricsCollector, manager_source
from kvcontract.observe import WhatIfObserver
from kvcontract.testing import example_identity
from kvcontract.tiers import FileTier
from kvcontract.transfer import TorchOffloadingWorker

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "kvcontract-dashboard.json"
_SERIES = re.compile(r"(?<![\w:{\"=])((?:vllm:|kvcontract_)[a-z_:]+)")


def exposed_names(tmp_path: Path) -> set[str]:
    """Every series name a collector with a tiering manager, a worker and the what-if exposes."""
    host = torch.zeros((4, 64), dtype=torch.uint8)
    tier = FileTier(tmp_path / "tier", 4, host, identity=example_identity(64))
    collector = MetricsCollector()
    collector.add(manager_source(TieringOffloadingManager(CPUOffloadingManager(4), [tier]), policy="lru"))
    worker = MeteredWorker(TorchOffloadingWorker([torch.zeros((4, 64), dtype=torch.uint8)], num_host_blocks=4))
    collector.add(worker.source)
    collector.add(WhatIfObserver(4, "lru", WhatIfConfig()).source)
    try:
        names = set[str]()
        for sample in collector.collect():
            suffixed = sample.kind == "counter" and not sample.name.endswith("_total")
            names.add(sample.name + "_total" if suffixed else sample.name)
            if sample.kind == "histogram":
                names |= {sample.name + suffix for suffix in ("_bucket", "_sum", "_count")}
        return names
    finally:
        tier.shutdown()
        worker.shutdown()


def test_every_query_names_a_series_kvcontract_exposes(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queried = {
        name for panel in dashboard["panels"] for target in panel["targets"] for name in _SERIES.findall(target["expr"])
    }
    assert queried, "the dashboard queries something"
    assert queried <= exposed_names(tmp_path), f"not exposed: {sorted(queried - exposed_names(tmp_path))}"
    assert {
        "kvcontract_whatif_hit_ratio",
        "kvcontract_whatif_policy_hit_ratio",
        "kvcontract_identity_mismatches_total",
    } <= queried
