"""vLLM's OpenAI server with the one-line ``--kv-transfer-config`` of docs/vllm.md: the offline engine's tokens.

The command is read from the docs, so the line a user copies is the line tested. Prompts go
over HTTP as token ids (``return_token_ids`` gives the generated ids back); vLLM's prefix cache
is emptied between the passes through its development endpoint, and ``/metrics`` must show
bytes kvcontract loaded.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.engines.support import REPOSITORY, EngineRun, Pass, TinyModel, differing, shared_prefix_prompts
from tests.tiers.redis.support import free_port

PROMPTS = shared_prefix_prompts(groups=2)
START_LIMIT_S = 240.0
"""Guard against a hang only: the server starts in well under a minute here."""
REQUEST_LIMIT_S = 60.0


def documented_command() -> list[str]:
    """The server command of docs/vllm.md's "vLLM on CPU", as words."""
    docs = (REPOSITORY / "docs" / "vllm.md").read_text(encoding="utf-8")
    (line,) = [line for line in docs.splitlines() if line.startswith("python -m vllm.entrypoints.openai.api_server")]
    return shlex.split(line)


def call(url: str, body: dict[str, object] | None = None) -> bytes:
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(request, timeout=REQUEST_LIMIT_S) as answer:
        body_bytes: bytes = answer.read()
        return body_bytes


@pytest.fixture
def server(tiny_model: tuple[TinyModel, Path], tmp_path: Path) -> Iterator[str]:
    """The documented server on the tiny model and a free port; its address."""
    _, path = tiny_model
    words = documented_command()
    assert words[:3] == ["python", "-m", "vllm.entrypoints.openai.api_server"]
    words[words.index("--model") + 1] = str(path)
    port = free_port()
    engine = ["--skip-tokenizer-init", "--dtype", "float32", "--enforce-eager", "--seed", "0"]
    sizes = ["--num-gpu-blocks-override", "64", "--max-model-len", "1024", "--max-num-seqs", "4"]
    sizes += ["--max-num-batched-tokens", "1024", "--gpu-memory-utilization", "0.1"]
    command = [sys.executable, *words[1:], *engine, *sizes, "--host", "127.0.0.1", "--port", str(port)]
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(
        command, cwd=REPOSITORY, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    )
    address = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while True:
            assert process.poll() is None, f"the server exited {process.returncode}; see {tmp_path / 'server.log'}"
            try:
                call(f"{address}/health")
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, f"the server did not answer within {START_LIMIT_S} s"
                time.sleep(0.5)
        yield address
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        log.close()


def generated(address: str, model: str, prompt: list[int]) -> list[int]:
    body = {"model": model, "prompt": prompt, "max_tokens": 8, "temperature": 0.0, "ignore_eos": True}
    answer = json.loads(call(f"{address}/v1/completions", {**body, "return_token_ids": True}))
    tokens: list[int] = answer["choices"][0]["token_ids"]
    return tokens


def metric(address: str, name: str) -> float:
    """The sum of the series of ``name`` on the server's ``/metrics``."""
    text = call(f"{address}/metrics").decode()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith((f"{name}{{", f"{name} "))
    )


def test_the_openai_server_with_the_documented_line_gives_the_offline_tokens(
    tiny_model: tuple[TinyModel, Path], server: str, without_offloading: Callable[[EngineRun], list[Pass]]
) -> None:
    _, path = tiny_model
    passes: list[list[list[int]]] = []
    for _ in range(2):
        passes.append([generated(server, str(path), prompt) for prompt in PROMPTS])
        call(f"{server}/reset_prefix_cache", {})
    reference = without_offloading(EngineRun(str(path), None, [PROMPTS, PROMPTS]))
    for number, (tokens, want) in enumerate(zip(passes, reference, strict=True)):
        assert differing(tokens, want.tokens) == [], f"pass {number}"
    assert metric(server, "vllm:kv_offload_load_bytes_total") > 0
