"""Validated configuration: pydantic models of the KV layout, managers and transfer, and loading.

Models are frozen, forbid unknown fields and are discriminated by ``kind``. Capacities are
offload blocks (an integer) or sizes (``"16GiB"``) turned into blocks from the layout.
Files may be YAML, TOML or JSON; ``KVCONTRACT_SECTION__FIELD=value`` environment variables
override fields (values are read as YAML scalars, so ``4096`` is a number).

Everything read here is untrusted: files and values are bounded (size, nesting, the limits
below) at this boundary, so that no config can make the components hang or allocate what
no machine has; the components trust a validated config. After validation every capacity
is a number of offload blocks, so a config dumped and loaded again is the same config.

The package's rooms: the models (``layout`` and its ``layout_groups``, ``identity``, ``policy``, ``manager``, ``tiers``,
``observe``, ``model``), sizes and limits, the loader, environment overrides, and the
machine checks.
"""

from kvcontract.config.errors import ConfigError
from kvcontract.config.identity import IdentityConfig
from kvcontract.config.layout import LAYOUT_PRESETS, KVLayout
from kvcontract.config.layout_groups import FullAttentionGroup, LayoutGroup, RecurrentStateGroup, SlidingWindowGroup
from kvcontract.config.limits import ConfigLimits
from kvcontract.config.loader import config_json_schema, load_config, read_config
from kvcontract.config.machine import check_machine, physical_memory_bytes
from kvcontract.config.manager import (
    CPUManagerConfig,
    ManagerConfig,
    ReuseAdmissionConfig,
    TieringManagerConfig,
)
from kvcontract.config.model import KVContractConfig, TransferConfig
from kvcontract.config.observe import BUILTIN_POLICIES, ObserveConfig, WhatIfConfig
from kvcontract.config.policy import PolicyConfig
from kvcontract.config.sizes import parse_size
from kvcontract.config.tiers import FileTierConfig, MooncakeTierConfig, RedisTierConfig

__all__ = [
    "BUILTIN_POLICIES",
    "CPUManagerConfig",
    "ConfigError",
    "ConfigLimits",
    "FileTierConfig",
    "FullAttentionGroup",
    "IdentityConfig",
    "ObserveConfig",
    "WhatIfConfig",
    "KVContractConfig",
    "KVLayout",
    "LAYOUT_PRESETS",
    "LayoutGroup",
    "ManagerConfig",
    "MooncakeTierConfig",
    "PolicyConfig",
    "RecurrentStateGroup",
    "RedisTierConfig",
    "ReuseAdmissionConfig",
    "SlidingWindowGroup",
    "TieringManagerConfig",
    "TransferConfig",
    "check_machine",
    "config_json_schema",
    "load_config",
    "parse_size",
    "physical_memory_bytes",
    "read_config",
]
