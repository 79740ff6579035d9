"""The KV-cache groups of a hybrid model: full attention, sliding window, recurrent state.

An engine keeps one KV-cache group per kind of layer (vLLM's ``kv_cache_groups``) and offloads
each block of each group under its own key: one host block per key, the host block as large as
the largest group's (vLLM pads every group's page to one size). What a group keeps of a request
of ``n`` offload blocks is what vLLM offers for storing with its default retention (semantic
checkpoints, ``prefix_cache_retention_interval=0``): full attention every block, a sliding window
the blocks that the window before the request's reuse boundary reaches, a recurrent state one
block (the state at the boundary).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BeforeValidator, ByteSize, Field

from kvcontract.config.base import ConfigModel
from kvcontract.config.limits import ConfigLimits
from kvcontract.config.sizes import parse_size

__all__ = ["FullAttentionGroup", "LayoutGroup", "RecurrentStateGroup", "SlidingWindowGroup", "grouped_hash_ids"]


def _state_size(value: object) -> object:
    """A size string (``"2MiB"``) as bytes; an integer as it is, for the field to bound."""
    return parse_size(value) if isinstance(value, str) else value


class FullAttentionGroup(ConfigModel):
    """Layers that attend to every earlier token: every block is kept."""

    kind: Literal["full_attention"] = "full_attention"
    num_layers: int = Field(ge=1, le=ConfigLimits.MAX_LAYERS)

    def kept_blocks(self, request_blocks: int, offload_block_tokens: int) -> int:
        """Offload blocks of a request of ``request_blocks`` this group keeps (the last ones)."""
        return request_blocks

    def summary(self) -> str:
        """The group in a few words, for reports."""
        return f"{self.num_layers} full-attention layers"


class SlidingWindowGroup(ConfigModel):
    """Layers that attend to the last ``window_tokens`` tokens: only the blocks a hit's window reaches are kept."""

    kind: Literal["sliding_window"] = "sliding_window"
    num_layers: int = Field(ge=1, le=ConfigLimits.MAX_LAYERS)
    window_tokens: int = Field(ge=1, le=ConfigLimits.MAX_CONTEXT_TOKENS)

    def kept_blocks(self, request_blocks: int, offload_block_tokens: int) -> int:
        """vLLM's count: the blocks holding the ``window_tokens - 1`` tokens before a boundary (at least one)."""
        return min(request_blocks, max(1, -(-(self.window_tokens - 1) // offload_block_tokens)))

    def summary(self) -> str:
        """The group in a few words, for reports."""
        return f"{self.num_layers} layers of a {self.window_tokens}-token window"


class RecurrentStateGroup(ConfigModel):
    """Layers with a fixed-size state per request (Mamba, linear attention): one block, the state at the boundary."""

    kind: Literal["recurrent_state"] = "recurrent_state"
    num_layers: int = Field(ge=1, le=ConfigLimits.MAX_LAYERS)
    state_bytes: Annotated[int, BeforeValidator(_state_size)] = Field(
        ge=1,
        le=ConfigLimits.MAX_OFFLOAD_BLOCK_BYTES,
        description="Bytes of one request's state over the group's layers: an integer or a size such as \"2MiB\".",
    )

    def kept_blocks(self, request_blocks: int, offload_block_tokens: int) -> int:
        """The state at the request's boundary."""
        return min(request_blocks, 1)

    def summary(self) -> str:
        """The group in a few words, for reports."""
        return f"{self.num_layers} layers of a {ByteSize(self.state_bytes).human_readable()} state"


LayoutGroup = Annotated[FullAttentionGroup | SlidingWindowGroup | RecurrentStateGroup, Field(discriminator="kind")]
"""One KV-cache group of ``kv_layout.groups``, discriminated by ``kind``."""


def grouped_hash_ids(
    hash_ids: Sequence[int], groups: Sequence[LayoutGroup], offload_block_tokens: int, names: dict[tuple[int, int], int]
) -> list[int]:
    """A request's blocks (``hash_ids``, one per offload block) as the keys its groups keep, position by position.

    The first group's keys are the hash ids themselves; another group's key of a block gets an id of
    its own, the same wherever the block recurs: ``names`` maps ``(hash id, group)`` to it, and holds
    ``(-1, -1)``, the first id free (above every id of the trace), before the first call.
    """
    total = len(hash_ids)
    firsts = [total - group.kept_blocks(total, offload_block_tokens) for group in groups]
    keys: list[int] = []
    for position, hash_id in enumerate(hash_ids):
        for index, first in enumerate(firsts):
            if position < first:
                continue
            if index == 0:
                keys.append(hash_id)
            else:
                keys.append(names.setdefault((hash_id, index), names[-1, -1] + len(names) - 1))
    return keys
