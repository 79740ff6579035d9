"""The kvcontract config of one vLLM connector, read from ``kv_connector_extra_config``.

``kv_connector_extra_config`` is untrusted input checked here once: besides the keys vLLM's
offloading connector reads itself, it takes ``"kvcontract"`` (a config as a mapping) or
``"config_file"`` (a YAML, TOML or JSON path), and ``cpu_bytes_to_use`` as vLLM's CPU
spec does. Any other key is an error naming it. The result is a config whose layout has
vLLM's block sizes, so the assembly (:mod:`kvcontract.assembly`) builds what vLLM addresses.

Sizes mean host memory over all workers, as in vLLM, however the config comes: in the
``kvcontract`` mapping (``"16GiB"``), in a ``config_file``, or as ``cpu_bytes_to_use``. One
offload block is ``worker_kv_bytes_per_block * blocks_per_chunk * world_size`` bytes, so every
size is turned into vLLM's blocks before the config validates plain block counts. The block
sizes in tokens are always vLLM's: a mapping that gives others is an error, a file's are
replaced (the same file may drive ``kvcontract simulate`` with its own). A ``kv_layout`` that
describes a model whose blocks are not vLLM's is one error naming both. A ``config_file`` sets
the capacity itself, so ``cpu_bytes_to_use`` beside it is an error.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import cast

from vllm.v1.kv_offload.config import OffloadingConfig

from kvcontract.config import (
    ConfigError,
    KVContractConfig,
    KVLayout,
    TieringManagerConfig,
    load_config,
    read_config,
)
from kvcontract.integrations.vllm.capacity import offload_block_bytes, size_in_blocks

__all__ = ["VLLM_KEYS", "connector_config"]

SOURCE: str = "kv_connector_extra_config"

VLLM_KEYS: frozenset[str] = frozenset(
    {
        "spec_name",
        "spec_module_path",
        "block_size",
        "blocks_per_chunk",
        "canonical_layout",
        "offload_prompt_only",
        "self_describing_kv_events",
        "sync_load_budget_bytes",
    }
)
"""Keys vLLM's offloading connector reads itself; they pass through."""

_OWN_KEYS = frozenset({"kvcontract", "config_file", "cpu_bytes_to_use"})

_KVCONTRACT_EQUIVALENTS = {
    "eviction_policy": "kvcontract.manager.policy",
    "cache_policy_module_path": 'kvcontract.manager.policy ("module:Class")',
    "store_threshold": "kvcontract.manager.admission",
    "max_tracker_size": "kvcontract.manager.admission",
    "secondary_tiers": "kvcontract.manager (kind: tiering, secondary: [...])",
}


def connector_config(config: OffloadingConfig) -> KVContractConfig:
    """The kvcontract config ``config.extra_config`` describes, fitted to vLLM's blocks."""
    extra = config.extra_config
    problems = [_unknown(key) for key in extra if key not in VLLM_KEYS and key not in _OWN_KEYS]
    if "kvcontract" in extra and "config_file" in extra:
        problems.append("kvcontract, config_file: give the kvcontract config one way, not both")
    if "config_file" in extra and "cpu_bytes_to_use" in extra:
        problems.append("cpu_bytes_to_use: the config file sets the capacity; give manager.capacity there")
    if problems:
        raise ConfigError(SOURCE, problems)
    if "config_file" in extra:
        path = extra["config_file"]
        if not isinstance(path, str) or not path:
            raise ConfigError(SOURCE, ["config_file: give the path of a YAML, TOML or JSON config"])
        source, prefix, raw = path, "", read_config(path)
    else:
        source, prefix, raw = SOURCE, "kvcontract.", extra.get("kvcontract", {})
    section = _fitted_section(raw, extra.get("cpu_bytes_to_use"), config, source=source, prefix=prefix)
    try:
        loaded = load_config(base=section)
    except ConfigError as error:
        # The mapping came from the file or from kv_connector_extra_config, not from kvcontract's defaults.
        raise ConfigError(source, [f"{prefix}{problem}" for problem in error.problems]) from None
    return _fit(loaded, config, source=source, prefix=prefix, layout_given=_names_a_model(section.get("kv_layout")))


_MODEL_FIELDS = frozenset({"preset", "num_layers", "num_kv_heads", "head_dim", "dtype"})


def _names_a_model(layout: object) -> bool:
    """Whether a raw ``kv_layout`` describes a model (a preset or any shape field), not only block sizes."""
    return isinstance(layout, str) or (
        isinstance(layout, dict) and not _MODEL_FIELDS.isdisjoint(cast("dict[str, object]", layout))
    )


def _unknown(key: object) -> str:
    equivalent = _KVCONTRACT_EQUIVALENTS.get(str(key))
    if equivalent is not None:
        return f"{key}: vLLM's CPU spec reads it, KVContractOffloadingSpec does not; set {equivalent}"
    known = ", ".join(sorted(VLLM_KEYS | _OWN_KEYS))
    return f"{key}: unknown key; known: {known}"


def _tokens(config: OffloadingConfig) -> tuple[int, int]:
    """vLLM's GPU block and offload block, in tokens."""
    block = config.groups[0].tokens_per_block if config.groups else 16
    return block, block * config.cache.blocks_per_chunk


def _fitted_section(
    section: object, cpu_bytes: object, config: OffloadingConfig, *, source: str, prefix: str
) -> dict[str, object]:
    """The raw config (the ``kvcontract`` mapping, or a file's sections) with vLLM's block sizes, sizes
    turned into vLLM's blocks and events on when vLLM publishes them, ready for its one validation;
    problems are named under ``prefix`` and reported from ``source``."""
    if not isinstance(section, Mapping):
        raise ConfigError(SOURCE, ["kvcontract: give the kvcontract config as a mapping of sections"])
    raw = {str(key): copy.deepcopy(value) for key, value in cast("Mapping[object, object]", section).items()}
    problems: list[str] = []
    layout = raw.setdefault("kv_layout", {})
    if isinstance(layout, str):
        layout = raw["kv_layout"] = {"preset": layout}
    if isinstance(layout, dict):
        fields = cast("dict[str, object]", layout)  # a section of the caller's mapping, checked to be a dict
        for name, wanted in zip(("block_tokens", "offload_block_tokens"), _tokens(config)):
            given = fields.setdefault(name, wanted)
            if given == wanted:
                continue
            if prefix:
                problems.append(f"{prefix}kv_layout.{name}: {given!r}, but vLLM's is {wanted}; leave it out")
            else:
                fields[name] = wanted  # a file keeps its own block sizes for other tools; under vLLM they are vLLM's
    chunk_bytes = offload_block_bytes(config)
    manager = raw.setdefault("manager", {})
    if isinstance(manager, dict):
        fields = cast("dict[str, object]", manager)  # as above
        tiering = fields.get("kind") == "tiering"
        primary = fields.setdefault("primary", {}) if tiering else fields
        path = f"{prefix}manager.primary" if tiering else f"{prefix}manager"
        if isinstance(primary, dict):
            held = cast("dict[str, object]", primary)  # as above
            named = f"{path}.capacity"
            if cpu_bytes is not None:
                if "capacity" in held:
                    problems.append(f"cpu_bytes_to_use: {path}.capacity is set too; give one of them")
                elif type(cpu_bytes) is not int or cpu_bytes < 1:
                    problems.append(f"cpu_bytes_to_use: give a number of bytes >= 1 (got {cpu_bytes!r})")
                else:
                    held["capacity"], named = f"{cpu_bytes}B", "cpu_bytes_to_use"
            _size_to_blocks(held, chunk_bytes, named, problems)
            if config.enable_kv_cache_events:
                held["enable_events"] = True  # vLLM publishes the events its manager takes
        tiers = fields.get("secondary") if tiering else None
        if isinstance(tiers, list):
            for index, tier in enumerate(cast("list[object]", tiers)):  # the raw list; items checked below
                if isinstance(tier, dict):
                    entry = cast("dict[str, object]", tier)
                    _size_to_blocks(entry, chunk_bytes, f"{prefix}manager.secondary.{index}.capacity", problems)
                    if config.enable_kv_cache_events:
                        entry.setdefault("enable_events", True)  # the tiers' events reach vLLM's too
    if problems:
        raise ConfigError(source, problems)
    return raw


def _size_to_blocks(fields: dict[str, object], block_bytes: int, path: str, problems: list[str]) -> None:
    if "capacity" not in fields:
        return
    try:
        fields["capacity"] = size_in_blocks(fields["capacity"], block_bytes)
    except ValueError as error:
        problems.append(f"{path}: {error}")


def _fit(
    loaded: KVContractConfig, config: OffloadingConfig, *, source: str, prefix: str, layout_given: bool
) -> KVContractConfig:
    """The validated config, once its layout is checked against vLLM's blocks when it names a model,
    and its tiering against vLLM's workers."""
    problems: list[str] = []
    layout = loaded.kv_layout
    host_block_bytes = config.worker_kv_bytes_per_block * max(config.parallel.world_size, 1)
    if layout_given and layout.gpu_block_bytes != host_block_bytes:
        problems.append(
            f"{prefix}kv_layout: {_described(layout)} is {layout.gpu_block_bytes} bytes per GPU block of "
            f"{layout.block_tokens} tokens, but vLLM's model has {host_block_bytes} "
            f"(worker_kv_bytes_per_block {config.worker_kv_bytes_per_block} x {max(config.parallel.world_size, 1)} "
            "workers); give the model's shape, or leave kv_layout out"
        )
    if isinstance(loaded.manager, TieringManagerConfig):
        worker_chunk_bytes = config.worker_kv_bytes_per_block * config.cache.blocks_per_chunk
        if config.parallel.world_size > 1:
            problems.append(f"{prefix}manager: tiering runs with one worker (world_size 1) in this release")
        if not layout_given and layout.offload_block_bytes != worker_chunk_bytes:
            problems.append(
                f"{prefix}kv_layout: a tiering manager maps the worker's host memory, whose offload blocks "
                f"hold {worker_chunk_bytes} bytes: give the model's num_layers, num_kv_heads, head_dim and dtype"
            )
    if problems:
        raise ConfigError(source, problems)
    return loaded


def _described(layout: KVLayout) -> str:
    return f"{layout.num_layers} layers x {layout.num_kv_heads} KV heads x {layout.head_dim} x {layout.dtype}"
