"""What one block holds: the KV layout, its dtypes and presets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Self, cast

from pydantic import (
    ByteSize,
    Field,
    model_validator,
)

from kvcontract.config.base import ConfigModel
from kvcontract.config.limits import ConfigLimits

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


class KVLayout(ConfigModel):
    """What one block holds: the model's KV shape, the GPU block and the offload block."""

    num_layers: int = Field(default=32, ge=1, le=ConfigLimits.MAX_LAYERS)
    block_tokens: int = Field(default=16, ge=1, le=ConfigLimits.MAX_BLOCK_TOKENS, description="Tokens per GPU block.")
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
