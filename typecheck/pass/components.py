"""Public types of the components built on the contracts, pinned with assert_type."""

from __future__ import annotations

from collections.abc import Callable
from typing import assert_type

import torch

from kvcontract import BlockIdsSpec, CachePolicy, ManagerStats, OffloadingManager, ReqContext, make_offload_key
from kvcontract.assembly import build_manager, build_worker
from kvcontract.config import KVContractConfig, load_config
from kvcontract.managers import (
    CPUOffloadingManager,
    FilterReusedOffloadingManager,
    TieringOffloadingManager,
    TieringStats,
)
from kvcontract.policies import available_policies, get_policy
from kvcontract.sim import ReplayReport, replay
from kvcontract.transfer import TorchOffloadingWorker

assert_type(get_policy("lru"), Callable[[int], CachePolicy])
assert_type(available_policies(), list[str])

cpu = CPUOffloadingManager(16, "arc", enable_events=True)
keys = [make_offload_key(b"k")]
assert_type(cpu.prepare_load(keys, ReqContext("r")), BlockIdsSpec)
assert_type(cpu.stats(), ManagerStats)
assert_type(FilterReusedOffloadingManager(cpu, store_threshold=3).inner, OffloadingManager)
assert_type(TieringOffloadingManager(cpu, []).stats(), TieringStats)
assert_type(replay(cpu, [[1, 2, 3]]), ReplayReport)
assert_type(replay(cpu, [[1, 2, 3]]).hit_ratio, float)

config = load_config(environ={})
assert_type(config, KVContractConfig)
assert_type(build_manager(config), OffloadingManager)
assert_type(build_worker(config, [torch.zeros(4, 16)]), TorchOffloadingWorker)
assert_type(build_worker(config, [torch.zeros(4, 16)]).host_buffer, torch.Tensor)
