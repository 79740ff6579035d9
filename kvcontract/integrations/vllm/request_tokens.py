"""vLLM 0.34's token counts of a request, for a kvcontract manager or policy that wants them.

From 0.34 vLLM's ``ReqContext`` reports how far its request has come (computed, in flight,
prompt and total tokens), live until the request finishes and frozen then. The adapter hands
kvcontract managers kvcontract's own context, so :func:`request_tokens` reads the counts of the
vLLM request behind it. kvcontract's built-in policies and its reuse filter do not read them:
the scheduler already offers a request's blocks in prefix order, which is what they rank by.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm.v1.kv_offload.base import ReqContext as VLLMReqContext

from kvcontract.integrations.vllm.releases import CONTEXTS_COUNT_TOKENS

__all__ = ["RequestTokens", "tokens_of"]


@dataclass(frozen=True)
class RequestTokens:
    """A request's token counts when read; ``None`` where vLLM gives none."""

    num_computed_tokens: int | None
    """Computed, including work in flight."""
    num_in_flight_tokens: int | None
    """Scheduled, their output not yet processed."""
    num_prompt_tokens: int | None
    num_tokens: int | None
    """Prompt and output tokens, speculative ones excluded."""


def tokens_of(context: VLLMReqContext) -> RequestTokens | None:
    """The counts vLLM's ``context`` reports now, or ``None`` on a vLLM whose contexts have none (0.33)."""
    if not CONTEXTS_COUNT_TOKENS:
        return None
    return RequestTokens(
        context.num_computed_tokens, context.num_in_flight_tokens, context.num_prompt_tokens, context.num_tokens
    )
