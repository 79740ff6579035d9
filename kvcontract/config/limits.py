"""The bounds no config may exceed, checked once at the boundary."""

from __future__ import annotations

from typing import ClassVar, cast

from kvcontract.config.errors import ConfigError


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
    MAX_CONTEXT_TOKENS: ClassVar[int] = 1 << 24
    """A sliding window of ``kv_layout.groups``: 16 Mi tokens, more than any model's context."""
    MAX_LAYOUT_GROUPS: ClassVar[int] = 64
    """KV-cache groups in ``kv_layout.groups``."""
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


def check_shape(data: object, source: str) -> None:
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
