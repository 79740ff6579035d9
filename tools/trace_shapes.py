"""Synthetic request traces of three shapes, to check policies beyond the one real trace.

Each shape is a list of requests, each request the hash ids of its prefix blocks, as
the replay and the offline optimum read them. Seeded, so every run sees the same trace.

- ``short_sessions``: many short conversations (1-4 turns) over a small shared system
  prompt; each turn extends its conversation's prefix by a few blocks.
- ``shared_prefixes``: a few long shared documents (40-120 blocks), each request one
  document followed by a short question of its own; popularity is Zipf-like.
- ``agent_loops``: tool-using agents, a few at a time, each running 5-25 steps that
  append a small tool result to its growing context.

    python tools/trace_shapes.py SHAPE OUT.jsonl   # writes a Mooncake-format trace
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path

SHAPES: dict[str, Callable[[int], list[list[int]]]] = {}


def _shape(function: Callable[[int], list[list[int]]]) -> Callable[[int], list[list[int]]]:
    SHAPES[function.__name__] = function
    return function


@_shape
def short_sessions(seed: int = 0) -> list[list[int]]:
    """2,000 conversations of 1-4 turns, up to 40 open at a time, over an 8-block system prompt."""
    rng, ids = random.Random(seed), itertools.count(1_000)
    system = list(range(8))
    open_sessions: list[tuple[list[int], int]] = []
    requests: list[list[int]] = []
    started = 0
    while started < 2_000 or open_sessions:
        if started < 2_000 and (len(open_sessions) < 40 and rng.random() < 0.6 or not open_sessions):
            open_sessions.append((system + [next(ids) for _ in range(rng.randint(2, 12))], rng.randint(1, 4)))
            started += 1
        index = rng.randrange(len(open_sessions))
        prefix, turns = open_sessions[index]
        requests.append(list(prefix))
        if turns == 1:
            open_sessions.pop(index)
        else:
            open_sessions[index] = (prefix + [next(ids) for _ in range(rng.randint(1, 6))], turns - 1)
    return requests


@_shape
def shared_prefixes(seed: int = 0) -> list[list[int]]:
    """800 requests over 6 long documents (Zipf-like popularity), each with its own 1-4 block question."""
    rng, ids = random.Random(seed), itertools.count(1_000_000)
    documents = [[next(ids) for _ in range(rng.randint(40, 120))] for _ in range(6)]
    weights = [1.0 / (rank + 1) for rank in range(len(documents))]
    return [rng.choices(documents, weights)[0] + [next(ids) for _ in range(rng.randint(1, 4))] for _ in range(800)]


@_shape
def agent_loops(seed: int = 0) -> list[list[int]]:
    """120 agents, 8 at a time, each 5-25 steps appending a 1-3 block tool result to a 20-block task."""
    rng, ids = random.Random(seed), itertools.count(2_000_000)
    tools_prompt = list(range(100, 116))
    running: list[tuple[list[int], int]] = []
    requests: list[list[int]] = []
    started = 0
    while started < 120 or running:
        while started < 120 and len(running) < 8:
            running.append((tools_prompt + [next(ids) for _ in range(4)], rng.randint(5, 25)))
            started += 1
        index = rng.randrange(len(running))
        context, steps = running[index]
        requests.append(list(context))
        if steps == 1:
            running.pop(index)
        else:
            running[index] = (context + [next(ids) for _ in range(rng.randint(1, 3))], steps - 1)
    return requests


def mooncake_lines(requests: list[list[int]]) -> Iterator[str]:
    """The requests as Mooncake-format JSON lines (one second apart, 16 tokens per block)."""
    for number, hash_ids in enumerate(requests):
        yield json.dumps(
            {"timestamp": number * 1000, "input_length": 16 * len(hash_ids), "output_length": 16, "hash_ids": hash_ids}
        )


def main() -> None:
    """Write one shape as a Mooncake trace."""
    parser = argparse.ArgumentParser(description="Write a synthetic trace of one shape.")
    parser.add_argument("shape", choices=sorted(SHAPES))
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    options.out.write_text("\n".join(mooncake_lines(SHAPES[options.shape](options.seed))) + "\n")


if __name__ == "__main__":
    main()
