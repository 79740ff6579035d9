"""Validated configuration: pydantic models of the KV layout, managers and transfer, and loading.

Models are frozen, forbid unknown fields and are discriminated by ``kind``. Capacities are
offload blocks (an integer) or sizes (``"16GiB"``) turned into blocks from the layout.
Files may be YAML, TOML or JSON; ``KVCONTRACT_SECTION__FIELD=value`` environment variables
override fields (values are read as YAML scalars, so ``4096`` is a number).

Everything read here is untrusted: files and values are bounded (size, nesting, the limits
below) at this boundary, so that no config can make the components hang or allocate what
no machine has; the components trust a validated config. After validation every capacity
is a number of offload blocks, so a config dumped and loaded again is the same config.
"""

from __future__ import annotations

import codecs
import copy
import json
import os
import re
import stat
import sys
import typing
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Annotated, ClassVar, Literal, Union, cast

import yaml
from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from typing_extensions import Self

from kvcontract.contracts.identity import BlockIdentity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "BUILTIN_POLICIES",
    "CPUManagerConfig",
    "ConfigError",
    "ConfigLimits",
    "FileTierConfig",
    "IdentityConfig",
    "ObserveConfig",
    "WhatIfConfig",
    "KVContractConfig",
    "KVLayout",
    "LAYOUT_PRESETS",
    "ManagerConfig",
    "MooncakeTierConfig",
    "PolicyConfig",
    "RedisTierConfig",
    "ReuseAdmissionConfig",
    "TieringManagerConfig",
    "TransferConfig",
    "check_machine",
    "config_json_schema",
    "load_config",
    "parse_size",
    "physical_memory_bytes",
    "read_config",
]

ENV_PREFIX = "KVCONTRACT_"
"""Prefix of environment variables that override config fields (``KVCONTRACT_CHECKS`` excepted)."""

_NOT_FIELDS = frozenset({"CHECKS"})
_DTYPE_BYTES = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int8": 1,
    "uint8": 1,
}
Dtype = Literal["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8", "uint8"]



class ConfigLimits:
    """Bounds no machine can exceed usefully; a config beyond one is refused naming it (docs/config.md)."""

    MAX_CONFIG_BYTES: ClassVar[int] = 1 << 20
    """A config file's size."""
    MAX_CONFIG_DEPTH: ClassVar[int] = 16
    """Nesting of sections and lists in a config."""
    MAX_CONFIG_VALUES: ClassVar[int] = 10_000
    """Values (sections, lists and scalars) in a config, YAML aliases counted at each use."""
    MAX_LAYERS: ClassVar[int] = 1024
    MAX_KV_HEADS: ClassVar[int] = 1024
    MAX_HEAD_DIM: ClassVar[int] = 4096
    MAX_BLOCK_TOKENS: ClassVar[int] = 4096
    """Tokens of a GPU block."""
    MAX_OFFLOAD_BLOCK_TOKENS: ClassVar[int] = 65_536
    MAX_OFFLOAD_BLOCK_BYTES: ClassVar[int] = 1 << 30
    """One offload block over all layers, K and V: 1 GiB."""
    WORD_BYTES: ClassVar[int] = 8
    """The K (or V) half of a GPU block in one layer is a whole number of these words."""
    MAX_CAPACITY_BLOCKS: ClassVar[int] = 1 << 32
    """Offload blocks of one capacity."""
    MAX_HOST_BYTES: ClassVar[int] = 64 << 40
    """Host memory of the CPU manager: 64 TiB, and at most this machine's physical memory to run."""
    MAX_TIER_BYTES: ClassVar[int] = 256 << 40
    """One secondary tier: 256 TiB."""
    MAX_TRACKER_SIZE: ClassVar[int] = 10_000_000
    """Keys the reuse filter tracks."""
    MAX_STORE_THRESHOLD: ClassVar[int] = 1_000_000
    MAX_IO_THREADS: ClassVar[int] = 64
    """Threads of one tier."""
    MAX_NAME_CHARS: ClassVar[int] = 256
    """A name in the block identity (model, revision, namespace...)."""
    MAX_PARALLEL: ClassVar[int] = 65_536
    """Size of one parallel axis (tensor, pipeline, context)."""
    MAX_WHATIF_MULTIPLIER: ClassVar[float] = 64.0
    """A what-if capacity, as a multiple of the primary's."""
    MAX_WHATIF_SHADOWS: ClassVar[int] = 16
    """What-if capacities, and what-if policies, each."""


_SIZE_UNITS: Mapping[str, int] = {
    "B": 1,
    **{f"{prefix}B": 1000 ** (power + 1) for power, prefix in enumerate("KMGTP")},
    **{f"{prefix}iB": 1024 ** (power + 1) for power, prefix in enumerate("KMGTP")},
}
"""The units a size takes, matched without regard to case: decimal (``GB``) and binary (``GiB``)."""
_UNITS_BY_CASE = {unit.lower(): factor for unit, factor in _SIZE_UNITS.items()}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$", re.IGNORECASE)
_SIZE_FORMS = f'a number and a unit ({", ".join(_SIZE_UNITS)}), such as "16GiB" or "1.5 TB"'
_CAPACITY_HELP = f"give offload blocks as an integer >= 1 (no quotes), or a size: {_SIZE_FORMS}"


def parse_size(text: str) -> int:
    """The bytes that ``text`` names: a number and one unit of a fixed list, nothing else around them.

    Raises ``ValueError`` naming the accepted forms (pydantic's ``ByteSize`` reads only a prefix,
    so ``"4000000%"`` and ``"64MiB!!"`` meant something; here they are refused).
    """
    match = _SIZE.match(text)
    factor = _UNITS_BY_CASE.get(match.group(2).lower()) if match else None
    if match is None or factor is None:
        raise ValueError(f"{text[:80]!r} is not a size: write {_SIZE_FORMS}")
    return int(Fraction(match.group(1)) * factor)


def _parse_capacity(value: object) -> int:
    """Blocks stay an ``int``; a size string becomes a :class:`ByteSize`, resolved with the layout."""
    if isinstance(value, bool):
        raise ValueError(f"capacity: {_CAPACITY_HELP}")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"capacity {_shown(value)} is below one block: {_CAPACITY_HELP}")
        if value > ConfigLimits.MAX_CAPACITY_BLOCKS:
            raise ValueError(
                f"capacity {_shown(value)} is more than the limit of {ConfigLimits.MAX_CAPACITY_BLOCKS} blocks"
            )
        return value
    if isinstance(value, str):
        try:
            size = ByteSize(parse_size(value))
        except ValueError:
            where = "; percentages of a trace's blocks are for kvcontract plan" if value.strip().endswith("%") else ""
            raise ValueError(f"capacity is not understood: {_CAPACITY_HELP}{where}") from None
        if size > ConfigLimits.MAX_TIER_BYTES:
            raise ValueError(
                f"capacity {value!r} is more than the limit of "
                f"{ByteSize(ConfigLimits.MAX_TIER_BYTES).human_readable()} of any capacity"
            )
        return size
    raise ValueError(f"capacity: {_CAPACITY_HELP}")


Capacity = Annotated[
    int,
    PlainValidator(_parse_capacity),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1, "description": "offload blocks"},
                {
                    "type": "string",
                    "pattern": r"^\s*\d+(\.\d+)?\s*([KkMmGgTtPp][Ii]?)?[Bb]\s*$",
                    "description": f"a size: {_SIZE_FORMS}",
                },
            ]
        }
    ),
    Field(description='Offload blocks as an integer, or a size such as "16GiB" turned into blocks.'),
]
"""A capacity: offload blocks (an integer) or a size string, turned into blocks from the layout."""


class ConfigError(ValueError):
    """A config file or value is invalid: ``problems`` names each bad field and what was expected.

    ``str()`` gives them on one line, for a command that ends with one clear line.
    """

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source: str = source
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__(f"{source}: {'; '.join(self.problems)}")


class _Model(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True)


class KVLayout(_Model):
    """What one block holds: the model's KV shape, the GPU block and the offload block."""

    num_layers: int = Field(default=32, ge=1, le=ConfigLimits.MAX_LAYERS)
    block_tokens: int = Field(
        default=16, ge=1, le=ConfigLimits.MAX_BLOCK_TOKENS, description="Tokens per GPU block."
    )
    offload_block_tokens: int = Field(
        default=64,
        ge=1,
        le=ConfigLimits.MAX_OFFLOAD_BLOCK_TOKENS,
        description="Tokens per offload block: a multiple of block_tokens.",
    )
    num_kv_heads: int = Field(default=8, ge=1, le=ConfigLimits.MAX_KV_HEADS)
    head_dim: int = Field(default=128, ge=1, le=ConfigLimits.MAX_HEAD_DIM)
    dtype: Dtype = "bfloat16"

    @model_validator(mode="before")
    @classmethod
    def _expand_preset(cls, data: object) -> object:
        if isinstance(data, str):
            return _preset(data)
        if not isinstance(data, dict):
            return data
        fields = dict(cast("dict[str, object]", data))  # pydantic hands raw input in as it came
        if "preset" in fields:
            return {**_preset(str(fields.pop("preset"))), **fields}
        return fields

    @model_validator(mode="after")
    def _offload_block_is_whole_gpu_blocks(self) -> Self:
        if self.offload_block_tokens % self.block_tokens:
            raise ValueError(
                f"offload_block_tokens ({self.offload_block_tokens}) must be a multiple of "
                f"block_tokens ({self.block_tokens})"
            )
        half = self.block_tokens * self.num_kv_heads * self.head_dim * self.dtype_bytes
        if half % ConfigLimits.WORD_BYTES:
            raise ValueError(
                f"the K (or V) half of a GPU block in one layer holds {half} bytes (block_tokens x "
                f"num_kv_heads x head_dim x {self.dtype_bytes}-byte {self.dtype}); the simulator and "
                f"the copy engines move whole {ConfigLimits.WORD_BYTES}-byte words: make it a multiple "
                f"of {ConfigLimits.WORD_BYTES}"
            )
        if self.offload_block_bytes > ConfigLimits.MAX_OFFLOAD_BLOCK_BYTES:
            raise ValueError(
                f"an offload block holds {ByteSize(self.offload_block_bytes).human_readable()}, more "
                f"than the limit of {ByteSize(ConfigLimits.MAX_OFFLOAD_BLOCK_BYTES).human_readable()}: "
                "use fewer offload_block_tokens"
            )
        return self

    @property
    def blocks_per_offload_block(self) -> int:
        """GPU blocks in one offload block."""
        return self.offload_block_tokens // self.block_tokens

    @property
    def dtype_bytes(self) -> int:
        """Bytes of one element."""
        return _DTYPE_BYTES[self.dtype]

    @property
    def gpu_block_bytes(self) -> int:
        """Bytes of one GPU block over all layers, K and V."""
        return 2 * self.num_layers * self.block_tokens * self.num_kv_heads * self.head_dim * self.dtype_bytes

    @property
    def offload_block_bytes(self) -> int:
        """Bytes of one offload block over all layers, K and V."""
        return self.gpu_block_bytes * self.blocks_per_offload_block


LAYOUT_PRESETS: Mapping[str, Mapping[str, int | str]] = {
    "llama-3.1-8b": {"num_layers": 32, "num_kv_heads": 8, "head_dim": 128, "dtype": "bfloat16"},
    "llama-3.1-70b": {"num_layers": 80, "num_kv_heads": 8, "head_dim": 128, "dtype": "bfloat16"},
    "qwen2.5-7b": {"num_layers": 28, "num_kv_heads": 4, "head_dim": 128, "dtype": "bfloat16"},
    "mistral-7b": {"num_layers": 32, "num_kv_heads": 8, "head_dim": 128, "dtype": "bfloat16"},
    "tiny": {"num_layers": 2, "num_kv_heads": 2, "head_dim": 32, "dtype": "float16"},
}
"""Public model shapes by name; ``kv_layout: llama-3.1-8b`` or ``{preset: llama-3.1-8b, ...}``."""


def _preset(name: str) -> dict[str, int | str]:
    if name not in LAYOUT_PRESETS:
        raise ValueError(f"unknown layout preset {name!r}; known: {', '.join(LAYOUT_PRESETS)}")
    return dict(LAYOUT_PRESETS[name])


class PolicyConfig(_Model):
    """An eviction policy by registry name (``lru``, ``arc``...) or ``"module:Class"`` path."""

    kind: str = "lru"

    @model_validator(mode="before")
    @classmethod
    def _name_alone(cls, data: object) -> object:
        return {"kind": data} if isinstance(data, str) else data

    @field_validator("kind")
    @classmethod
    def _known_policy(cls, kind: str) -> str:
        from kvcontract.policies import get_policy

        try:
            factory = get_policy(kind)
        except ValueError:
            raise
        except Exception as error:  # a module path runs a plugin's code: any failure is the plugin's
            raise ValueError(f"policy {kind!r}: importing it raised {type(error).__name__}: {error}") from None
        if ":" in kind and not _makes_policies(factory):
            raise ValueError(
                f"policy path {kind!r} names {getattr(factory, '__qualname__', repr(factory))}, which is "
                "neither a CachePolicy class nor a function annotated to return a CachePolicy"
            )
        return kind


def _makes_policies(factory: object) -> bool:
    """Whether ``factory`` builds policies, judged by type: a ``CachePolicy`` class, or a
    function whose return annotation is one (a path is never called to find out)."""
    from kvcontract.contracts import CachePolicy

    if isinstance(factory, type):
        return CachePolicy in factory.__mro__
    try:
        returned: object = typing.get_type_hints(factory).get("return")
    except Exception:  # unresolvable annotations of a plugin: not a declared CachePolicy factory
        return False
    return isinstance(returned, type) and CachePolicy in returned.__mro__


class ReuseAdmissionConfig(_Model):
    """Store a block only once it has been seen ``store_threshold`` times."""

    kind: Literal["reuse"] = "reuse"
    store_threshold: int = Field(default=2, ge=2, le=ConfigLimits.MAX_STORE_THRESHOLD)
    max_tracker_size: int = Field(default=64_000, ge=1, le=ConfigLimits.MAX_TRACKER_SIZE)


class CPUManagerConfig(_Model):
    """Host-memory manager: a pool of ``capacity`` offload blocks with an eviction policy."""

    kind: Literal["cpu"] = "cpu"
    capacity: Capacity = 4096
    policy: PolicyConfig = PolicyConfig()
    admission: ReuseAdmissionConfig | None = None
    enable_events: bool = False


class FileTierConfig(_Model):
    """Blocks as files under ``path``, with their own capacity and eviction policy.

    ``umask`` sets the modes of what the tier creates (``0o077``: files 0600, directories
    0700; ``0o007`` shares them with a group); octal strings such as ``"007"`` are read as
    octal. ``path`` must belong to this user and be writable by no one the umask leaves
    out, unless ``trust_shared_root`` says everyone who can write it is trusted (docs/file-tier.md).
    """

    kind: Literal["file"] = "file"
    path: Path
    capacity: Capacity
    policy: PolicyConfig = PolicyConfig()
    io_threads: int = Field(default=4, ge=1, le=ConfigLimits.MAX_IO_THREADS)
    umask: int = Field(default=0o077, ge=0, le=0o077, description="Permission bits the tier never grants.")
    trust_shared_root: bool = False
    enable_events: bool = False

    @field_validator("umask", mode="before")
    @classmethod
    def _octal_string(cls, value: object) -> object:
        if isinstance(value, str) and value.strip():
            digits = value.strip().lower().removeprefix("0o")
            if not digits or digits.strip("01234567"):
                raise ValueError(f"umask {value!r} is not octal: write it like 0o077 or \"077\"")
            return int(digits, 8)
        return value


class RedisTierConfig(_Model):
    """Blocks as values on a Redis server or Redis Cluster that many engines share; Redis owns capacity.

    Give ``url`` or ``cluster_nodes`` (``host:port``). Timeouts are seconds. Key names
    derive from the block identity; ``namespace`` (optional) is added to them, scoping keys
    further within one identity, never across identities.
    """

    kind: Literal["redis"] = "redis"
    url: str | None = Field(default=None, pattern=r"^(redis|rediss|unix)://")
    cluster_nodes: list[Annotated[str, Field(pattern=r"^[^:\s]+:\d{1,5}$")]] = Field(
        default_factory=list[str]
    )
    namespace: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[^{}\s]+$")
    socket_timeout: float = Field(default=1.0, gt=0)
    connect_timeout: float = Field(default=1.0, gt=0)
    lookup_timeout: float = Field(default=0.1, gt=0)
    pool_size: int = Field(default=8, ge=2)
    ttl_seconds: int | None = Field(default=None, ge=1)
    io_threads: int = Field(default=4, ge=1, le=ConfigLimits.MAX_IO_THREADS)
    start_degraded: bool = False
    retry_interval: float = Field(default=1.0, gt=0)

    @model_validator(mode="after")
    def _one_address(self) -> Self:
        if (self.url is None) == (not self.cluster_nodes):
            raise ValueError("give exactly one of url (redis://host:port/db) and cluster_nodes ([host:port, ...])")
        if self.pool_size < self.io_threads + 1:
            raise ValueError(
                f"pool_size ({self.pool_size}) must be at least io_threads + 1 ({self.io_threads + 1}): "
                "each I/O thread and the lookup thread hold a connection"
            )
        return self


class MooncakeTierConfig(_Model):
    """Blocks as objects in a Mooncake Store that many engines share; Mooncake owns capacity and eviction.

    ``master`` is ``host:port`` of ``mooncake_master``; ``metadata_server`` its HTTP metadata
    server (or ``P2PHANDSHAKE``). Each engine lends ``global_segment_size`` bytes of its memory
    to the store (0: none, it only uses the others'); ``local_hostname`` is the address other
    clients reach this one at. Sizes are bytes or strings such as ``"1GiB"``; timeouts are
    seconds. Key names derive from the block identity; ``namespace`` scopes them further.
    """

    kind: Literal["mooncake"] = "mooncake"
    master: str = Field(default="127.0.0.1:50051", pattern=r"^[^:\s]+:\d{1,5}$")
    metadata_server: str = Field(default="http://127.0.0.1:8080/metadata", pattern=r"^(https?://\S+|P2PHANDSHAKE)$")
    protocol: Literal["tcp", "rdma"] = "tcp"
    devices: str = Field(default="", description="RDMA devices (e.g. mlx5_0,mlx5_1); empty over TCP.")
    local_hostname: str = Field(default="127.0.0.1", min_length=1, pattern=r"^\S+$")
    global_segment_size: ByteSize = Field(default=ByteSize(1 << 30), ge=0, le=ConfigLimits.MAX_TIER_BYTES)
    local_buffer_size: ByteSize = Field(default=ByteSize(256 << 20), ge=0, le=ConfigLimits.MAX_TIER_BYTES)
    replicas: int = Field(default=1, ge=1, le=16)
    timeout: float = Field(default=5.0, gt=0)
    io_threads: int = Field(default=4, ge=1, le=ConfigLimits.MAX_IO_THREADS)
    namespace: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[^{}:\s]+$")
    lookup_timeout: float = Field(default=0.1, gt=0)
    start_degraded: bool = False
    retry_interval: float = Field(default=1.0, gt=0)


TierConfig = Annotated[Union[FileTierConfig, RedisTierConfig, MooncakeTierConfig], Field(discriminator="kind")]


class TieringManagerConfig(_Model):
    """A host-memory manager with ordered tiers below it."""

    kind: Literal["tiering"] = "tiering"
    primary: CPUManagerConfig = CPUManagerConfig()
    secondary: list[TierConfig] = Field(default_factory=list[TierConfig])


ManagerConfig = Annotated[Union[CPUManagerConfig, TieringManagerConfig], Field(discriminator="kind")]


class IdentityConfig(_Model):
    """What names this engine's blocks beside ``kv_layout``: the model, its parallel position, the hash scheme.

    Every persistent or shared tier keeps blocks of each identity apart (see
    :class:`kvcontract.contracts.BlockIdentity`). Set ``model`` when models of one layout
    share a tier; engine adapters (vLLM) set model, ranks and hash scheme from the engine
    themselves. ``namespace`` separates engines that would otherwise share blocks.
    """

    model: str = Field(default="", max_length=ConfigLimits.MAX_NAME_CHARS, description="Model name, e.g. meta-llama/Llama-3.1-8B.")
    revision: str = Field(default="", max_length=ConfigLimits.MAX_NAME_CHARS)
    kv_quantization: str = Field(
        default="", max_length=ConfigLimits.MAX_NAME_CHARS, description="KV-cache quantization scheme, if any."
    )
    hash_scheme: str = Field(
        default="", max_length=ConfigLimits.MAX_NAME_CHARS, description="How the engine hashes blocks into keys."
    )
    namespace: str = Field(default="", max_length=ConfigLimits.MAX_NAME_CHARS)
    tp_size: int = Field(default=1, ge=1, le=ConfigLimits.MAX_PARALLEL)
    tp_rank: int = Field(default=0, ge=0)
    pp_size: int = Field(default=1, ge=1, le=ConfigLimits.MAX_PARALLEL)
    pp_rank: int = Field(default=0, ge=0)
    cp_size: int = Field(default=1, ge=1, le=ConfigLimits.MAX_PARALLEL)
    cp_rank: int = Field(default=0, ge=0)

    @field_validator("tp_rank", "pp_rank", "cp_rank")
    @classmethod
    def _rank_within_size(cls, rank: int, info: ValidationInfo) -> int:
        axis = str(info.field_name).removesuffix("_rank")
        size = info.data.get(f"{axis}_size")
        if isinstance(size, int) and rank >= size:
            raise ValueError(f"{axis}_rank ({rank}) must be below {axis}_size ({size})")
        return rank


BUILTIN_POLICIES = ("lru", "arc", "s3fifo", "sieve", "prefix_reuse")
"""The policies kvcontract ships: the what-if observer compares all of them by default."""


class WhatIfConfig(_Model):
    """The live what-if: hit ratios at other capacities and under other policies, from sampled shadows.

    ``capacities`` are multiples of the primary's capacity; ``sample_rate`` is the fraction of
    blocks the shadows see (1.0 is exact); the recent window spans ``window_requests`` requests.
    """

    capacities: list[Annotated[float, Field(gt=0, le=ConfigLimits.MAX_WHATIF_MULTIPLIER)]] = Field(
        default_factory=lambda: [0.5, 2.0, 4.0], max_length=ConfigLimits.MAX_WHATIF_SHADOWS
    )
    policies: list[PolicyConfig] = Field(
        default_factory=lambda: [PolicyConfig(kind=name) for name in BUILTIN_POLICIES],
        max_length=ConfigLimits.MAX_WHATIF_SHADOWS,
    )
    sample_rate: float = Field(default=0.01, gt=0, le=1)
    window_requests: int = Field(default=10_000, ge=10, le=ConfigLimits.MAX_TRACKER_SIZE)

    @field_validator("capacities")
    @classmethod
    def _distinct_capacities(cls, capacities: list[float]) -> list[float]:
        if len(set(capacities)) != len(capacities):
            raise ValueError(f"each multiple once: {capacities}")
        return capacities

    @field_validator("policies")
    @classmethod
    def _distinct_policies(cls, policies: list[PolicyConfig]) -> list[PolicyConfig]:
        names = [policy.kind for policy in policies]
        if len(set(names)) != len(names):
            raise ValueError(f"each policy once: {names}")
        return policies


class ObserveConfig(_Model):
    """What kvcontract watches beside the primary manager while it serves; off by default, costing nothing."""

    whatif: WhatIfConfig | None = None


class TransferConfig(_Model):
    """Where the KV cache lives and how host memory is allocated."""

    device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$")
    pinned: Literal["auto"] | bool = "auto"
    shared_memory_path: str | None = None


class KVContractConfig(_Model):
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
        if isinstance(manager, CPUManagerConfig):
            blocks = in_blocks(manager.capacity, "manager.capacity", host, "host memory")
            normalized: ManagerConfig = manager.model_copy(update={"capacity": blocks})
        else:
            primary = manager.primary
            blocks = in_blocks(primary.capacity, "manager.primary.capacity", host, "host memory")
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
            normalized = manager.model_copy(
                update={"primary": primary.model_copy(update={"capacity": blocks}), "secondary": secondary}
            )
        if problems:
            raise ValueError("; ".join(problems))
        # Frozen for callers; validation completes the instance here (pydantic supports no
        # other instance from a validator when a model is built through __init__).
        object.__setattr__(self, "manager", normalized)
        return self

    def capacity_blocks(self, capacity: int) -> int:
        """``capacity`` in offload blocks: after validation every capacity already is."""
        return _blocks(capacity, self.kv_layout, "capacity", ConfigLimits.MAX_TIER_BYTES, "a capacity")

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
        manager = self.manager
        primary = manager if isinstance(manager, CPUManagerConfig) else manager.primary
        return self.capacity_blocks(primary.capacity)


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


def physical_memory_bytes() -> int:
    """This machine's physical memory: the most host memory a config may ask for to run here."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no sysconf here: only the static limit applies
        return ConfigLimits.MAX_HOST_BYTES


def check_machine(config: KVContractConfig, source: str = "config") -> None:
    """Raise :class:`ConfigError` unless this machine can run ``config``: its device exists, its
    host memory fits in physical memory, and a shared-memory file present has the buffer's size."""
    problems: list[str] = []
    device = config.transfer.device
    if device.startswith("cuda"):
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if int(device.partition(":")[2] or 0) >= count:
            problems.append(
                f"transfer.device: {device} does not exist on this machine ({count} CUDA devices); "
                "use auto or cpu"
            )
    host_bytes = config.host_blocks * config.kv_layout.offload_block_bytes
    memory = physical_memory_bytes()
    if host_bytes > memory:
        problems.append(
            f"{_primary_path(config)}: {ByteSize(host_bytes).human_readable()} of host memory is more "
            f"than this machine's {ByteSize(memory).human_readable()} of physical memory"
        )
    shared = config.transfer.shared_memory_path
    if shared is not None:
        problem = _shared_file_problem(Path(shared), host_bytes)
        if problem is not None:
            problems.append(f"transfer.shared_memory_path: {problem}")
    if problems:
        raise ConfigError(source, problems)


def _primary_path(config: KVContractConfig) -> str:
    return "manager.capacity" if isinstance(config.manager, CPUManagerConfig) else "manager.primary.capacity"


def _shared_file_problem(path: Path, size: int) -> str | None:
    """Why the host buffer of ``size`` bytes cannot map ``path`` (absent: it is created), or ``None``."""
    try:
        status = path.stat()
    except FileNotFoundError:
        if not path.parent.is_dir():
            return f"{path.parent} is not a directory, so {path} cannot be created"
        return None
    except OSError as error:
        return f"cannot read {path}: {error.strerror}"
    if not stat.S_ISREG(status.st_mode):
        return f"{path} is not a regular file"
    if status.st_size not in (0, size):
        return (
            f"{path} holds {status.st_size} bytes, this config's host buffer needs {size} "
            "(host blocks x bytes per offload block): use the same geometry, or remove the file"
        )
    return None


def config_json_schema() -> dict[str, object]:
    """The JSON schema of :class:`KVContractConfig`."""
    return KVContractConfig.model_json_schema()


def load_config(
    path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    base: Mapping[str, object] | None = None,
) -> KVContractConfig:
    """Read ``path`` (YAML, TOML or JSON), or take ``base`` (or the defaults) without one,
    then apply ``KVCONTRACT_`` environment overrides.

    Raises :class:`ConfigError` naming the file and every bad field.
    """
    source = str(path) if path is not None else "defaults"
    data = _read(Path(path)) if path is not None else dict(base or {})
    _check_shape(data, source)
    data = _apply_environment(data, os.environ if environ is None else environ)
    _check_shape(data, source)
    try:
        return KVContractConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(source, _describe(error)) from None


def read_config(path: str | Path) -> dict[str, object]:
    """A config file's sections as written, not yet validated: for a caller that fits them to an
    engine before :func:`load_config` (``base=``) checks them, as the vLLM adapter turns sizes into
    vLLM's blocks. Raises :class:`ConfigError` naming the file when it cannot be read or parsed."""
    data = _read(Path(path))
    _check_shape(data, str(path))
    return data


def _read(path: Path) -> dict[str, object]:
    source = str(path)
    try:
        with path.open("rb") as file:
            raw = file.read(ConfigLimits.MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise ConfigError(source, [f"cannot read config: {error.strerror or error}"]) from None
    if len(raw) > ConfigLimits.MAX_CONFIG_BYTES:
        raise ConfigError(source, [f"a config file is at most {ConfigLimits.MAX_CONFIG_BYTES} bytes"])
    text = _decode(raw, source)
    suffix = path.suffix.lower()
    if suffix not in {".yaml", ".yml", ".toml", ".json"}:
        raise ConfigError(source, [f"unknown config format {suffix!r}; use .yaml, .toml or .json"])
    format_name = "YAML" if suffix in {".yaml", ".yml"} else suffix[1:].upper()
    try:
        if format_name == "YAML":
            loaded: object = yaml.safe_load(text)
        elif format_name == "TOML":
            loaded = tomllib.loads(text)
        else:
            loaded = json.loads(text)
    except RecursionError:
        raise ConfigError(
            source, [f"not valid {format_name}: nested deeper than the parser allows (a config nests at most "
                     f"{ConfigLimits.MAX_CONFIG_DEPTH} levels)"]
        ) from None
    except (yaml.YAMLError, ValueError) as error:  # ValueError: JSON/TOML syntax, or an integer too long to read
        raise ConfigError(source, [f"not valid {format_name}: {_parse_failure(error)}"]) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(source, [f"a config is a mapping of sections, got {type(loaded).__name__}"])
    return {str(k): v for k, v in cast("dict[object, object]", loaded).items()}  # parsed YAML/TOML/JSON is untyped


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _parse_failure(error: Exception) -> str:
    """A parser's complaint on one line, short, in the user's terms."""
    detail = " ".join(str(error).split())
    if isinstance(error, ValueError) and "integer string conversion" in detail:
        return f"an integer has more than {sys.get_int_max_str_digits()} digits"
    return detail if len(detail) <= 300 else f"{detail[:297]}..."


def _decode(raw: bytes, source: str) -> str:
    """The text of a config file: UTF-8, or UTF-16/32 with a byte-order mark."""
    encoding = next((name for bom, name in _BOMS if raw.startswith(bom)), "utf-8")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as error:
        raise ConfigError(
            source,
            [f"not {encoding.upper().removesuffix('-SIG')} text: byte {error.object[error.start]:#04x} at "
             f"offset {error.start} cannot be decoded; save the file as UTF-8"],
        ) from None


def _check_shape(data: object, source: str) -> None:
    """Refuse configs nested too deeply or with too many values (YAML aliases count at each
    use, so an alias bomb or a cycle stops here) before anything walks them recursively."""
    pending: list[tuple[object, int]] = [(data, 0)]
    seen = 0
    while pending:
        value, depth = pending.pop()
        seen += 1
        if seen > ConfigLimits.MAX_CONFIG_VALUES:
            raise ConfigError(source, [f"a config holds at most {ConfigLimits.MAX_CONFIG_VALUES} values"])
        if depth > ConfigLimits.MAX_CONFIG_DEPTH:
            raise ConfigError(source, [f"a config nests at most {ConfigLimits.MAX_CONFIG_DEPTH} levels"])
        if isinstance(value, dict):
            children: list[object] = list(cast("dict[object, object]", value).values())  # parsed, untyped
        elif isinstance(value, list):
            children = list(cast("list[object]", value))  # parsed, untyped
        else:
            continue
        pending.extend((child, depth + 1) for child in children)


def _is_override(name: str) -> bool:
    """Whether environment variable ``name`` overrides a field: ``KVCONTRACT_SECTION__FIELD``, or
    ``KVCONTRACT_`` and a top-level field. Other ``KVCONTRACT_`` variables (``KVCONTRACT_CHECKS``,
    test switches) belong to other tools, so a one-word name that is no field is left alone."""
    if not name.startswith(ENV_PREFIX):
        return False
    rest = name[len(ENV_PREFIX):]
    return "__" in rest or (rest not in _NOT_FIELDS and rest.lower() in KVContractConfig.model_fields)


def _apply_environment(data: dict[str, object], environ: Mapping[str, str]) -> dict[str, object]:
    merged = copy.deepcopy(data)
    for name, raw in sorted(environ.items()):
        if not _is_override(name):
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX):].split("__")]
        node = merged
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(name, [f"{'.'.join(path[:-1])} is not a section"])
            node = cast("dict[str, object]", child)  # sections of parsed JSON are str-keyed objects
        try:
            value: object = yaml.safe_load(raw)
        except RecursionError:
            raise ConfigError(name, ["not a YAML value: nested deeper than the parser allows"]) from None
        except (yaml.YAMLError, ValueError) as error:  # ValueError: an integer too long to read
            raise ConfigError(name, [f"not a YAML value ({_parse_failure(error)}); quote strings"]) from None
        _check_shape(value, name)
        node[path[-1]] = value
    return merged


def _describe(error: ValidationError) -> list[str]:
    lines: list[str] = []
    for problem in error.errors(include_url=False):
        message = problem["msg"].removeprefix("Value error, ")
        if not problem["loc"]:
            lines.append(message)
            continue
        location = _field_path(problem["loc"])
        given = problem.get("input")
        shown = "" if isinstance(given, (dict, list)) or given is None else f" (got {_shown(given)})"
        lines.append(f"{location}: {message}{shown}")
    return lines


def _shown(value: object) -> str:
    """``value`` as an error shows it: at most 80 characters, and huge integers by their size
    (Python refuses to print integers of more than 4,300 digits)."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


_KIND_TAGS = frozenset({"cpu", "tiering", "file", "redis", "mooncake"})


def _field_path(location: Sequence[int | str]) -> str:
    """The field's path as written in the file: without the ``kind`` tags pydantic inserts."""
    parts = [
        str(part)
        for i, part in enumerate(location)
        if not (part in _KIND_TAGS and i and (location[i - 1] == "manager" or isinstance(location[i - 1], int)))
    ]
    return ".".join(parts)
