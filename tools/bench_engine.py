"""vLLM's CPU engine with kvcontract: a reloaded long prefix against recomputing it, and a shared-prefix workload.

Runs where vLLM's engine runs (the environment of requirements/vllm-engine.txt). The model is a
Llama with random weights made here, big enough that prefill dominates (``--layers`` 8, hidden
``--hidden`` 1024, float32). Two engine processes stay up the whole run, one with kvcontract's spec
(host memory, the CPU manager) and one without offloading; the driver sends them the rounds.
``--vllm-spec`` adds a third with vLLM's own ``CPUOffloadingSpec`` (it runs on CUDA only:
tools/device_engine.sh), measured as kvcontract's is.

Time to first token (one generated token, wall clock) of a request with a ``--prefix``-token
prefix, in the engine with kvcontract, three ways within each round: a prefix never seen
(recomputed), the same prefix after vLLM's prefix cache was emptied (loaded from kvcontract), and
the same prefix once more (vLLM's own prefix-cache hit: the floor, nothing is copied). The hit
comes last, and the reload starts once the recomputed prefix is stored (kvcontract answers
``HIT_PENDING`` until then, and vLLM waits): what is measured is a reload, not the store before it. Goals: the reload at least 20x faster than recomputing and within 1.5x of
the prefix-cache hit.

Throughput of a shared-prefix workload (``--groups`` prefixes, ``--per-group`` prompts each,
visited round-robin so vLLM's small KV cache has evicted a prefix before it comes again), in
the engine with offloading and in the one without, alternating which goes first. Goal: faster
with offloading.

Each figure is the median over ``--rounds`` rounds (at least 5), ratios the median of per-round
ratios; the machine's load average is printed beside them.

    python tools/bench_engine.py [--rounds 5] [--prefix 4096] [--layers 8] [--hidden 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.engines.support import BLOCK_SIZE, VOCAB, TinyModel, offload  # noqa: E402  (the repository's root first)

HOST_BYTES = 3 << 30


SPECS: dict[str, dict[str, Any] | None] = {
    "kvcontract": {**offload(), "cpu_bytes_to_use": HOST_BYTES},
    "vllm": {"spec_name": "CPUOffloadingSpec", "cpu_bytes_to_use": HOST_BYTES},
    "none": None,
}
"""Each side's ``kv_connector_extra_config``: kvcontract's spec, vLLM's own, no offloading."""


def serve(model: str, side: str, gpu_blocks: int, max_model_len: int) -> None:
    """The engine side: one engine, rounds read as JSON lines on standard input, timings written back."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever vLLM prints goes to the log; the replies keep standard output to themselves
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig
    from vllm.inputs import TokensPrompt
    from vllm.v1.metrics.reader import Counter

    options: dict[str, Any] = {}
    extra = SPECS[side]
    if extra is not None:
        options["kv_transfer_config"] = KVTransferConfig(
            kv_connector="OffloadingConnector", kv_role="kv_both", kv_connector_extra_config=extra
        )
    llm = LLM(
        model=model,
        skip_tokenizer_init=True,
        block_size=BLOCK_SIZE,
        dtype="float32",
        enforce_eager=True,
        num_gpu_blocks_override=gpu_blocks,
        max_model_len=max_model_len,
        max_num_batched_tokens=max_model_len,
        max_num_seqs=8,
        gpu_memory_utilization=0.2,
        enable_prefix_caching=True,
        disable_log_stats=False,  # the offloading's counters tell when a store has landed
        seed=0,
        **options,
    )
    first = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)

    def timed(prompts: list[list[int]], sampling: SamplingParams) -> tuple[float, list[list[int]]]:
        start = time.perf_counter()
        outputs = llm.generate(  # pyright: ignore[reportUnknownMemberType]  (vLLM leaves its tqdm type open)
            [TokensPrompt(prompt_token_ids=p) for p in prompts], sampling, use_tqdm=False
        )
        return time.perf_counter() - start, [list(o.outputs[0].token_ids) for o in outputs]

    def empty_prefix_cache() -> None:
        for _ in range(100):  # stores still in flight hold blocks; a step lets them land
            if llm.reset_prefix_cache():
                return
            llm.generate(  # pyright: ignore[reportUnknownMemberType]  (vLLM leaves its tqdm type open)
                [TokensPrompt(prompt_token_ids=[1, 2])], first, use_tqdm=False
            )
        raise RuntimeError("vLLM never emptied its prefix cache")

    def stored_bytes() -> float:
        return sum(
            float(m.value)
            for m in llm.get_metrics()
            if m.name == "vllm:kv_offload_store_bytes" and isinstance(m, Counter)
        )

    def wait_for_stores(total: float) -> None:
        """Step until the offloading has stored ``total`` bytes: a reload right after its store would wait for it."""
        for _ in range(10_000):
            if stored_bytes() >= total:
                return
            llm.generate(  # pyright: ignore[reportUnknownMemberType]  (vLLM leaves its tqdm type open)
                [TokensPrompt(prompt_token_ids=[1, 2])], first, use_tqdm=False
            )
        raise RuntimeError(f"the offloading never stored {total:.0f} bytes")

    print(json.dumps({"ready": True}), file=replies, flush=True)
    for line in sys.stdin:
        order = json.loads(line)
        if order["kind"] == "ttft":
            prefix: list[int] = order["prefix"]
            suffixes: list[list[int]] = order["suffixes"]
            before = stored_bytes()
            recompute, _ = timed([prefix + suffixes[0]], first)
            wait_for_stores(before + order["store_bytes"])
            empty_prefix_cache()
            reload, _ = timed([prefix + suffixes[1]], first)
            hit, _ = timed([prefix + suffixes[2]], first)  # last: no store of the prefix is left to land in its step
            empty_prefix_cache()
            answer: dict[str, Any] = {"recompute": recompute, "prefix_cache_hit": hit, "reload": reload}
        else:
            sampling = SamplingParams(temperature=0.0, max_tokens=order["max_tokens"], ignore_eos=True)
            elapsed, tokens = timed(order["prompts"], sampling)
            empty_prefix_cache()
            answer = {"seconds": elapsed, "tokens": tokens}
        print(json.dumps(answer), file=replies, flush=True)


class Engine:
    """An engine process the driver sends rounds to."""

    def __init__(self, model: Path, side: str, args: argparse.Namespace, log: Path) -> None:
        command = [
            sys.executable,
            __file__,
            "--serve",
            str(model),
            "--side",
            side,
            "--gpu-blocks",
            str(args.gpu_blocks),
        ]
        command += ["--max-model-len", str(args.prefix + 256)]
        self._log = log.open("wb")
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, cwd=ROOT
        )
        assert self._reply()["ready"]

    def _reply(self) -> dict[str, Any]:
        stdout: IO[str] | None = self._process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"an engine exited {self._process.wait()}; its log: {self._log.name}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def ask(self, order: dict[str, Any]) -> dict[str, Any]:
        stdin: IO[str] | None = self._process.stdin
        assert stdin is not None
        stdin.write(json.dumps(order) + "\n")
        stdin.flush()
        return self._reply()

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=120)
        self._log.close()


def tokens(draw: random.Random, count: int) -> list[int]:
    return [draw.randrange(VOCAB) for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prefix", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--gpu-blocks", type=int, default=160)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--per-group", type=int, default=3)
    parser.add_argument("--shared", type=int, default=1024, help="tokens of each workload prefix")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--vllm-spec", action="store_true", help="also vLLM's own CPUOffloadingSpec (CUDA only)")
    parser.add_argument("--side", choices=sorted(SPECS), help=argparse.SUPPRESS)
    parser.add_argument("--max-model-len", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.side, args.gpu_blocks, args.max_model_len)
        return
    if args.rounds < 5:
        parser.error("--rounds: at least 5, so that a median means something")
    workdir = Path(tempfile.mkdtemp(prefix="kvcontract-bench-engine-"))
    os.environ.setdefault("VLLM_CACHE_ROOT", str(workdir / "vllm-cache"))
    model = TinyModel(layers=args.layers, hidden=args.hidden, heads=args.hidden // 64, kv_heads=args.hidden // 128)
    path = model.save(workdir / "model")
    print(f"model: {args.layers} layers, hidden {args.hidden}, float32; prefix {args.prefix} tokens; {workdir}")
    offloading = ["kvcontract", "vllm"] if args.vllm_spec else ["kvcontract"]
    engines = {side: Engine(path, side, args, workdir / f"{side}.log") for side in [*offloading, "none"]}
    draw = random.Random(7)
    ttft: dict[str, dict[str, list[float]]] = {
        side: {"recompute": [], "prefix_cache_hit": [], "reload": []} for side in offloading
    }
    speedups: dict[str, list[float]] = {side: [] for side in offloading}
    floors: dict[str, list[float]] = {side: [] for side in offloading}
    workload: dict[str, list[float]] = {side: [] for side in engines}
    gains: dict[str, list[float]] = {side: [] for side in offloading}
    try:
        for number in range(args.rounds):
            line = [f"round {number}:"]
            for side in offloading:
                order = {
                    "kind": "ttft",
                    "prefix": tokens(draw, args.prefix),
                    "suffixes": [tokens(draw, 16) for _ in range(3)],
                    "store_bytes": (args.prefix + 16) // BLOCK_SIZE * model.block_bytes,
                }
                times = engines[side].ask(order)
                for name, values in ttft[side].items():
                    values.append(times[name])
                speedups[side].append(times["recompute"] / times["reload"])
                floors[side].append(times["reload"] / times["prefix_cache_hit"])
                line.append(
                    f"{side}: recompute {times['recompute']:.3f} s, prefix-cache hit {times['prefix_cache_hit']:.3f} s, "
                    f"reload {times['reload']:.3f} s;"
                )
            heads = [tokens(draw, args.shared) for _ in range(args.groups)]
            prompts = [head + tokens(draw, 32) for _ in range(args.per_group) for head in heads]
            job = {"kind": "workload", "prompts": prompts, "max_tokens": 16}
            sides = list(engines)
            sides = sides[number % len(sides) :] + sides[: number % len(sides)]  # who goes first rotates
            seconds: dict[str, float] = {}
            outputs: dict[str, list[list[int]]] = {}
            for side in sides:
                reply = engines[side].ask(job)
                seconds[side], outputs[side] = reply["seconds"], reply["tokens"]
            for side in engines:
                assert outputs[side] == outputs["none"], f"{side}'s offloading changed a generated token"
                workload[side].append(seconds[side])
            for side in offloading:
                gains[side].append(seconds["none"] / seconds[side])
            line.append("workload " + ", ".join(f"{side} {seconds[side]:.2f} s" for side in engines))
            print(" ".join(line) + f"; load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        for engine in engines.values():
            engine.close()
    median = statistics.median
    for side in offloading:
        print(f"{side}: time to first token, {args.prefix}-token prefix (median of {args.rounds} rounds):")
        for name, values in ttft[side].items():
            print(f"  {name:17s} {median(values):.3f} s  (rounds: {', '.join(f'{v:.3f}' for v in values)})")
        print(f"  reload vs recompute: {median(speedups[side]):.1f}x faster (goal: at least 20x)")
        print(f"  reload vs prefix-cache hit: {median(floors[side]):.2f}x the floor (goal: within 1.5x)")
    print(f"workload ({args.groups} prefixes of {args.shared} tokens x {args.per_group}, round-robin, 16 tokens each):")
    print("  " + ", ".join(f"{side} {median(values):.2f} s" for side, values in workload.items()))
    for side in offloading:
        print(f"  {side}: {median(gains[side]):.2f}x as fast as without offloading (goal: above 1)")
    print("  every token equal to the engine without offloading, in every round")


if __name__ == "__main__":
    main()
