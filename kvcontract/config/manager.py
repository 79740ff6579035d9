"""The manager tree: reuse admission, the CPU manager and the tiering manager."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
)

from kvcontract.config.base import ConfigModel
from kvcontract.config.limits import ConfigLimits
from kvcontract.config.policy import PolicyConfig
from kvcontract.config.sizes import Capacity
from kvcontract.config.tiers import TierConfig


class ReuseAdmissionConfig(ConfigModel):
    """Store a block only once it has been seen ``store_threshold`` times."""

    kind: Literal["reuse"] = "reuse"
    store_threshold: int = Field(default=2, ge=2, le=ConfigLimits.MAX_STORE_THRESHOLD)
    max_tracker_size: int = Field(default=64_000, ge=1, le=ConfigLimits.MAX_TRACKER_SIZE)


class CPUManagerConfig(ConfigModel):
    """Host-memory manager: a pool of ``capacity`` offload blocks with an eviction policy."""

    kind: Literal["cpu"] = "cpu"
    capacity: Capacity = 4096
    policy: PolicyConfig = PolicyConfig()
    admission: ReuseAdmissionConfig | None = None
    enable_events: bool = False


class TieringManagerConfig(ConfigModel):
    """A host-memory manager with ordered tiers below it."""

    kind: Literal["tiering"] = "tiering"
    primary: CPUManagerConfig = CPUManagerConfig()
    secondary: list[TierConfig] = Field(default_factory=list[TierConfig])
    cascade_share: float = Field(default=1.0, gt=0, le=1)
    """The share of host memory that writes to the tiers in flight may pin together; blocks beyond it are
    not written down (``skipped_cascades``). Below 1, a tier that stops answering cannot take all of it."""


ManagerConfig = Annotated[CPUManagerConfig | TieringManagerConfig, Field(discriminator="kind")]
