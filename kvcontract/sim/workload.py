"""The built-in workload: multi-turn conversations that share system prompts, seeded.

Each request is the list of prefix block hash ids it needs, in the Mooncake trace's
sense: a system prompt's blocks, then the conversation's history, then the new turn.
Popular system prompts and long conversations make prefix reuse, as in real serving.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["WorkloadShape", "conversation_workload"]


@dataclass(frozen=True)
class WorkloadShape:
    """The knobs of the built-in workload, in offload blocks."""

    system_prompts: int = 12
    system_prompt_blocks: tuple[int, int] = (2, 10)
    active_conversations: int = 48
    mean_turns: float = 5.0
    user_blocks: tuple[int, int] = (1, 3)
    answer_blocks: tuple[int, int] = (1, 2)
    max_context_blocks: int = 64


@dataclass
class _Conversation:
    history: list[int]
    turns_left: int
    pending_answer: list[int] = field(default_factory=list[int])


def conversation_workload(
    num_requests: int = 3000, seed: int = 0, shape: WorkloadShape = WorkloadShape()
) -> list[list[int]]:
    """``num_requests`` requests as lists of prefix block hash ids, the same for the same seed."""
    if num_requests < 0:
        raise ValueError(f"num_requests must be >= 0, got {num_requests}")
    rng = random.Random(seed)
    next_id = 0

    def fresh(count: int) -> list[int]:
        nonlocal next_id
        ids = list(range(next_id, next_id + count))
        next_id += count
        return ids

    prompts = [fresh(rng.randint(*shape.system_prompt_blocks)) for _ in range(shape.system_prompts)]
    popularity = [1.0 / (rank + 1) for rank in range(len(prompts))]

    def start() -> _Conversation:
        prompt = rng.choices(prompts, weights=popularity)[0]
        turns = max(1, round(rng.expovariate(1.0 / shape.mean_turns)))
        return _Conversation(history=list(prompt), turns_left=turns)

    active = [start() for _ in range(shape.active_conversations)]
    requests: list[list[int]] = []
    while len(requests) < num_requests:
        slot = rng.randrange(len(active))
        conversation = active[slot]
        context = conversation.history + conversation.pending_answer + fresh(rng.randint(*shape.user_blocks))
        requests.append(context[: shape.max_context_blocks])
        conversation.history = context
        conversation.pending_answer = fresh(rng.randint(*shape.answer_blocks))
        conversation.turns_left -= 1
        if conversation.turns_left == 0 or len(context) >= shape.max_context_blocks:
            active[slot] = start()
    return requests
