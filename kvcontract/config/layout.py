"""What one block holds: the KV layout, its dtypes and presets, and a hybrid model's groups."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Self, cast

from pydantic import (
    ByteSize,
    Field,
    model_validator,
)

from kvcontract.config.base import ConfigModel
from kvcontract.config.layout_groups import LayoutGroup, RecurrentStateGroup, grouped_hash_ids
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
    groups: tuple[LayoutGroup, ...] | None = Field(
        default=None,
        min_length=1,
        max_length=ConfigLimits.MAX_LAYOUT_GROUPS,
        description=(
            "A hybrid model's KV-cache groups (full_attention, sliding_window, recurrent_state), their "
            "layers adding up to num_layers; each group's blocks are kept under keys of their own."
        ),
    )

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
    def _groups_hold_the_layers(self) -> Self:
        if self.groups is not None and sum(group.num_layers for group in self.groups) != self.num_layers:
            counts = " + ".join(str(group.num_layers) for group in self.groups)
            raise ValueError(
                f"groups: their num_layers add up to {sum(g.num_layers for g in self.groups)} ({counts}), "
                f"but num_layers is {self.num_layers}: every layer belongs to exactly one group"
            )
        for index, group in enumerate(self.groups or ()):
            if isinstance(group, RecurrentStateGroup) and group.state_bytes % ConfigLimits.WORD_BYTES:
                raise ValueError(
                    f"groups.{index}.state_bytes: {group.state_bytes} bytes; the copy engines move whole "
                    f"{ConfigLimits.WORD_BYTES}-byte words: give a multiple of {ConfigLimits.WORD_BYTES}"
                )
        return self

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

    def _attention_bytes(self, layers: int) -> int:
        """Bytes of one GPU block of ``layers`` attention layers, K and V."""
        return 2 * layers * self.block_tokens * self.num_kv_heads * self.head_dim * self.dtype_bytes

    @property
    def gpu_block_bytes(self) -> int:
        """Bytes of one GPU block over all layers, K and V; with ``groups``, of the largest group's block
        (a recurrent state's block is its state), the page size the engine gives every group."""
        if self.groups is None:
            return self._attention_bytes(self.num_layers)
        return max(
            group.state_bytes if isinstance(group, RecurrentStateGroup) else self._attention_bytes(group.num_layers)
            for group in self.groups
        )

    @property
    def offload_block_bytes(self) -> int:
        """Bytes of one offload block over all layers, K and V; with ``groups``, one host block, which
        holds one group's offload block (a key per block and group) in pages of the largest group's."""
        return self.gpu_block_bytes * self.blocks_per_offload_block

    def grouped_requests(self, requests: Sequence[Sequence[int]]) -> Sequence[Sequence[int]]:
        """Requests' block hash ids (one per offload block) as the keys the layout's groups keep:
        ``requests`` themselves without ``groups``, see :func:`~kvcontract.config.layout_groups.grouped_hash_ids`."""
        if self.groups is None:
            return requests
        names = {(-1, -1): 1 + max((hash_id for hash_ids in requests for hash_id in hash_ids), default=0)}
        return [grouped_hash_ids(hash_ids, self.groups, self.offload_block_tokens, names) for hash_ids in requests]


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
