"""The whole configuration: layout, identity, manager tree, transfer settings, runtime checks."""

from __future__ import annotations

from typing import Literal, Self, cast

from pydantic import (
    ByteSize,
    Field,
    model_validator,
)

from kvcontract.config.base import ConfigModel
from kvcontract.config.identity import IdentityConfig
from kvcontract.config.layout import KVLayout
from kvcontract.config.limits import ConfigLimits
from kvcontract.config.manager import CPUManagerConfig, ManagerConfig
from kvcontract.config.observe import ObserveConfig
from kvcontract.config.tiers import FileTierConfig
from kvcontract.contracts.identity import BlockIdentity


class TransferConfig(ConfigModel):
    """Where the KV cache lives and how host memory is allocated."""

    device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$")
    pinned: Literal["auto"] | bool = "auto"
    shared_memory_path: str | None = None


class KVContractConfig(ConfigModel):
    """The whole configuration: layout, manager tree, transfer settings, runtime checks."""

    kv_layout: KVLayout = KVLayout()
    identity: IdentityConfig = IdentityConfig()
    manager: ManagerConfig = CPUManagerConfig()
    transfer: TransferConfig = TransferConfig()
    observe: ObserveConfig = ObserveConfig()
    runtime_checks: bool = True

    @model_validator(mode="before")
    @classmethod
    def _manager_kind_defaults_to_cpu(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        fields = dict(cast("dict[str, object]", data))  # pydantic hands raw input in as it came
        manager = fields.get("manager")
        if isinstance(manager, dict) and "kind" not in manager:
            fields["manager"] = {"kind": "cpu", **cast("dict[str, object]", manager)}
        return fields

    @model_validator(mode="after")
    def _capacities_in_blocks(self) -> Self:
        """Turn every size into offload blocks once, so the config means one thing however it is
        printed: ``config show`` writes blocks, which load back as the same blocks."""
        config = self
        layout = config.kv_layout
        problems: list[str] = []

        def in_blocks(capacity: int, path: str, limit: int, what: str) -> int:
            try:
                return _blocks(capacity, layout, path, limit, what)
            except ValueError as error:
                problems.append(str(error))
                return capacity

        manager = config.manager
        host = ConfigLimits.MAX_HOST_BYTES
        # a capacity already in blocks is left as it is, so that its model still tells (fields set)
        # whether the file gave it or it is the default, as the machine check says
        if isinstance(manager, CPUManagerConfig):
            blocks = in_blocks(manager.capacity, "manager.capacity", host, "host memory")
            normalized: ManagerConfig = (
                manager.model_copy(update={"capacity": blocks}) if isinstance(manager.capacity, ByteSize) else manager
            )
        else:
            primary = manager.primary
            blocks = in_blocks(primary.capacity, "manager.primary.capacity", host, "host memory")
            if isinstance(primary.capacity, ByteSize):
                primary = primary.model_copy(update={"capacity": blocks})
            secondary = [
                tier.model_copy(
                    update={
                        "capacity": in_blocks(
                            tier.capacity, f"manager.secondary.{i}.capacity", ConfigLimits.MAX_TIER_BYTES, "a tier"
                        )
                    }
                )
                if isinstance(tier, FileTierConfig)
                else tier
                for i, tier in enumerate(manager.secondary)
            ]
            normalized = manager.model_copy(update={"primary": primary, "secondary": secondary})
        whatif = config.observe.whatif
        for i, multiple in enumerate(whatif.capacities if whatif is not None else ()):
            if blocks * multiple < 1:
                problems.append(
                    f"observe.whatif.capacities.{i}: {multiple:g} times the primary's {blocks} blocks is less than one "
                    f"block, a shadow that cannot hold anything: give multiples of at least {1 / blocks:.3g}"
                )
        if problems:
            raise ValueError("; ".join(problems))
        # Frozen for callers; validation completes the instance here (pydantic supports no
        # other instance from a validator when a model is built through __init__).
        object.__setattr__(self, "manager", normalized)
        return self

    @property
    def primary(self) -> CPUManagerConfig:
        """The host-memory manager: ``manager`` itself, or a tiering manager's primary."""
        manager = self.manager
        return manager if isinstance(manager, CPUManagerConfig) else manager.primary

    def block_identity(self) -> BlockIdentity:
        """The identity of the blocks this config's engine writes: ``kv_layout`` and ``identity`` together."""
        layout, named = self.kv_layout, self.identity
        return BlockIdentity(
            model=named.model,
            revision=named.revision,
            dtype=layout.dtype,
            num_layers=layout.num_layers,
            num_kv_heads=layout.num_kv_heads,
            head_dim=layout.head_dim,
            block_tokens=layout.block_tokens,
            offload_block_tokens=layout.offload_block_tokens,
            block_bytes=layout.offload_block_bytes,
            kv_quantization=named.kv_quantization,
            tp_size=named.tp_size,
            tp_rank=named.tp_rank,
            pp_size=named.pp_size,
            pp_rank=named.pp_rank,
            cp_size=named.cp_size,
            cp_rank=named.cp_rank,
            hash_scheme=named.hash_scheme,
            namespace=named.namespace,
        )

    @property
    def host_blocks(self) -> int:
        """Offload blocks of host memory: the CPU manager's capacity."""
        return self.primary.capacity


def _blocks(capacity: int, layout: KVLayout, path: str, limit: int, what: str) -> int:
    """``capacity`` (blocks, or a :class:`ByteSize`) as a plain number of blocks within ``limit`` bytes."""
    block = layout.offload_block_bytes
    blocks = int(capacity) // block if isinstance(capacity, ByteSize) else int(capacity)
    if blocks < 1:
        raise ValueError(
            f"{path}: {ByteSize(capacity).human_readable()} holds no offload block of "
            f"{ByteSize(block).human_readable()}; give at least one block"
        )
    if blocks * block > limit:
        raise ValueError(
            f"{path}: {blocks} blocks of {ByteSize(block).human_readable()} are "
            f"{ByteSize(blocks * block).human_readable()}, more than the limit of "
            f"{ByteSize(limit).human_readable()} for {what}"
        )
    return blocks
