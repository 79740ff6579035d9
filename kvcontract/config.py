"""Validated configuration: pydantic models of the KV layout, managers and transfer, and loading.

Models are frozen, forbid unknown fields and are discriminated by ``kind``. Capacities are
offload blocks (an integer) or sizes (``"16GiB"``) turned into blocks from the layout.
Files may be YAML, TOML or JSON; ``KVCONTRACT_SECTION__FIELD=value`` environment variables
override fields (values are read as YAML scalars, so ``4096`` is a number).
"""

from __future__ import annotations

import copy
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, ClassVar, Literal, Union, cast

import yaml
from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from typing_extensions import Self

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "CPUManagerConfig",
    "ConfigError",
    "FileTierConfig",
    "KVContractConfig",
    "KVLayout",
    "LAYOUT_PRESETS",
    "ManagerConfig",
    "PolicyConfig",
    "RedisTierConfig",
    "ReuseAdmissionConfig",
    "TieringManagerConfig",
    "TransferConfig",
    "config_json_schema",
    "load_config",
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

_CAPACITY_HELP = 'give offload blocks as an integer >= 1, or a size such as "16GiB"'


def _parse_capacity(value: object) -> int:
    """Blocks stay an ``int``; a size string becomes a :class:`ByteSize`, resolved with the layout."""
    if isinstance(value, bool):
        raise ValueError(f"capacity: {_CAPACITY_HELP}")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"capacity {value} is below one block: {_CAPACITY_HELP}")
        return value
    if isinstance(value, str):
        try:
            return _BYTE_SIZE.validate_python(value)
        except ValidationError:
            raise ValueError(f"capacity {value!r} is not understood: {_CAPACITY_HELP}") from None
    raise ValueError(f"capacity: {_CAPACITY_HELP}")


_BYTE_SIZE = TypeAdapter(ByteSize)
Capacity = Annotated[
    int,
    PlainValidator(_parse_capacity),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1, "description": "offload blocks"},
                {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*[KMGTP]?i?B\s*$", "description": "a size"},
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

    num_layers: int = Field(default=32, ge=1)
    block_tokens: int = Field(default=16, ge=1, description="Tokens per GPU block.")
    offload_block_tokens: int = Field(
        default=64, ge=1, description="Tokens per offload block: a multiple of block_tokens."
    )
    num_kv_heads: int = Field(default=8, ge=1)
    head_dim: int = Field(default=128, ge=1)
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

        get_policy(kind)
        return kind


class ReuseAdmissionConfig(_Model):
    """Store a block only once it has been seen ``store_threshold`` times."""

    kind: Literal["reuse"] = "reuse"
    store_threshold: int = Field(default=2, ge=2)
    max_tracker_size: int = Field(default=64_000, ge=1)


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
    io_threads: int = Field(default=4, ge=1)
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

    Give ``url`` or ``cluster_nodes`` (``host:port``). Timeouts are seconds. ``namespace``
    prefixes every key and enters the layout fingerprint, so give each model its own.
    """

    kind: Literal["redis"] = "redis"
    url: str | None = Field(default=None, pattern=r"^(redis|rediss|unix)://")
    cluster_nodes: list[Annotated[str, Field(pattern=r"^[^:\s]+:\d{1,5}$")]] = Field(
        default_factory=list[str]
    )
    namespace: str = Field(default="kvc", min_length=1, pattern=r"^[^{}\s]+$")
    socket_timeout: float = Field(default=1.0, gt=0)
    connect_timeout: float = Field(default=1.0, gt=0)
    lookup_timeout: float = Field(default=0.1, gt=0)
    pool_size: int = Field(default=8, ge=2)
    ttl_seconds: int | None = Field(default=None, ge=1)
    io_threads: int = Field(default=4, ge=1)
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


TierConfig = Annotated[Union[FileTierConfig, RedisTierConfig], Field(discriminator="kind")]


class TieringManagerConfig(_Model):
    """A host-memory manager with ordered tiers below it."""

    kind: Literal["tiering"] = "tiering"
    primary: CPUManagerConfig = CPUManagerConfig()
    secondary: list[TierConfig] = Field(default_factory=list[TierConfig])


ManagerConfig = Annotated[Union[CPUManagerConfig, TieringManagerConfig], Field(discriminator="kind")]


class TransferConfig(_Model):
    """Where the KV cache lives and how host memory is allocated."""

    device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$")
    pinned: Literal["auto"] | bool = "auto"
    shared_memory_path: str | None = None


class KVContractConfig(_Model):
    """The whole configuration: layout, manager tree, transfer settings, runtime checks."""

    kv_layout: KVLayout = KVLayout()
    manager: ManagerConfig = CPUManagerConfig()
    transfer: TransferConfig = TransferConfig()
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
    def _capacities_hold_a_block(self) -> Self:
        for path, capacity in self._capacities():
            _blocks(capacity, self.kv_layout, path)
        return self

    def _capacities(self) -> list[tuple[str, int]]:
        manager = self.manager
        if isinstance(manager, CPUManagerConfig):
            return [("manager.capacity", manager.capacity)]
        tiers = [
            (f"manager.secondary.{i}.capacity", tier.capacity)
            for i, tier in enumerate(manager.secondary)
            if isinstance(tier, FileTierConfig)
        ]
        return [("manager.primary.capacity", manager.primary.capacity), *tiers]

    def capacity_blocks(self, capacity: int) -> int:
        """``capacity`` (blocks, or a ByteSize) in offload blocks of this layout."""
        return _blocks(capacity, self.kv_layout, "capacity")

    @property
    def host_blocks(self) -> int:
        """Offload blocks of host memory: the CPU manager's capacity."""
        manager = self.manager
        primary = manager if isinstance(manager, CPUManagerConfig) else manager.primary
        return self.capacity_blocks(primary.capacity)


def _blocks(capacity: int, layout: KVLayout, path: str) -> int:
    if not isinstance(capacity, ByteSize):
        return capacity
    blocks = capacity // layout.offload_block_bytes
    if blocks < 1:
        raise ValueError(
            f"{path}: {capacity.human_readable()} holds no offload block of "
            f"{ByteSize(layout.offload_block_bytes).human_readable()}; give at least one block"
        )
    return blocks


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
    data = _apply_environment(data, os.environ if environ is None else environ)
    try:
        return KVContractConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(source, _describe(error)) from None


def _read(path: Path) -> dict[str, object]:
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(str(path), [f"cannot read config: {error.strerror}"]) from None
    suffix = path.suffix.lower()
    try:
        if suffix in {".yaml", ".yml"}:
            loaded: object = yaml.safe_load(text)
        elif suffix == ".toml":
            loaded = tomllib.loads(text)
        elif suffix == ".json":
            loaded = json.loads(text)
        else:
            raise ConfigError(str(path), [f"unknown config format {suffix!r}; use .yaml, .toml or .json"])
    except (yaml.YAMLError, tomllib.TOMLDecodeError, json.JSONDecodeError) as error:
        detail = " ".join(str(error).split())
        raise ConfigError(str(path), [f"not valid {suffix[1:].upper()}: {detail}"]) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(str(path), [f"a config is a mapping of sections, got {type(loaded).__name__}"])
    return {str(k): v for k, v in cast("dict[object, object]", loaded).items()}  # parsed YAML/TOML/JSON is untyped


def _apply_environment(data: dict[str, object], environ: Mapping[str, str]) -> dict[str, object]:
    merged = copy.deepcopy(data)
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or name[len(ENV_PREFIX):] in _NOT_FIELDS:
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX):].split("__")]
        node = merged
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(name, [f"{'.'.join(path[:-1])} is not a section"])
            node = cast("dict[str, object]", child)  # sections of parsed JSON are str-keyed objects
        node[path[-1]] = yaml.safe_load(raw)
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
        shown = "" if isinstance(given, (dict, list)) or given is None else f" (got {given!r})"
        lines.append(f"{location}: {message}{shown}")
    return lines


_KIND_TAGS = frozenset({"cpu", "tiering", "file", "redis"})


def _field_path(location: Sequence[int | str]) -> str:
    """The field's path as written in the file: without the ``kind`` tags pydantic inserts."""
    parts = [
        str(part)
        for i, part in enumerate(location)
        if not (part in _KIND_TAGS and i and (location[i - 1] == "manager" or isinstance(location[i - 1], int)))
    ]
    return ".".join(parts)
