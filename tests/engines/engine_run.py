"""One run of vLLM's real engine, in a process of its own: ``python -m tests.engines.engine_run RUN.json OUT.json``.

The tests start a process per engine, so each engine gets a clean vLLM (its global state, its
KV cache) and a crash or a hang is the test's failure, not the test run's. The engine core runs
in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), where the control can reach its worker.
``RUN.json`` holds an :class:`EngineRun`'s fields; ``OUT.json`` gets every pass's token ids and the
engine's offloading and prefix-cache counters after each pass.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import torch
from typing_extensions import override
from vllm.v1.kv_offload.base import CanonicalKVCaches

from kvcontract.contracts import (
    GPULoadStoreSpec,
    LoadStoreSpec,
    OffloadingWorker,
    TransferResult,
)

HANDSHAKE_LIMIT_S = 300.0
"""Guard against a hang only: the test acts between passes within seconds."""


class ZeroingWorker(OffloadingWorker):
    """The control's worker: ``inner``'s, but every block it loads into ``kv_caches`` is zeroed once the load is done."""

    def __init__(self, inner: OffloadingWorker, kv_caches: list[list[torch.Tensor]]) -> None:
        self._inner = inner
        self._kv_caches = kv_caches
        self._loads: dict[int, Sequence[int]] = {}

    @override
    def submit_store(self, job_id: int, src: GPULoadStoreSpec, dst: LoadStoreSpec) -> bool:
        return self._inner.submit_store(job_id, src, dst)

    @override
    def submit_load(self, job_id: int, src: LoadStoreSpec, dst: GPULoadStoreSpec) -> bool:
        self._loads[job_id] = dst.block_ids
        return self._inner.submit_load(job_id, src, dst)

    @override
    def get_finished(self) -> list[TransferResult]:
        results = self._inner.get_finished()
        for result in results:
            blocks = self._loads.pop(result.job_id, None)
            if blocks is not None and result.success:
                ids = torch.tensor(blocks, dtype=torch.long)
                for group in self._kv_caches:
                    for tensor in group:
                        tensor.index_fill_(0, ids, 0)
        return results

    @override
    def wait(self, job_ids: Collection[int]) -> None:
        self._inner.wait(job_ids)

    @override
    def shutdown(self) -> None:
        self._inner.shutdown()


def zero_loaded_blocks() -> None:
    """The control: kvcontract's vLLM worker drives a :class:`ZeroingWorker` in this process."""
    from kvcontract.integrations.vllm import worker as adapter

    build = adapter.KVContractOffloadingWorker.__init__

    def zeroing(
        self: adapter.KVContractOffloadingWorker,
        inner: OffloadingWorker,
        kv_caches: CanonicalKVCaches,
        *,
        blocks_per_offload_block: int = 1,
    ) -> None:
        control = ZeroingWorker(inner, adapter.group_tensors(kv_caches))
        build(self, control, kv_caches, blocks_per_offload_block=blocks_per_offload_block)

    setattr(adapter.KVContractOffloadingWorker, "__init__", zeroing)


def between_passes(folder: Path, number: int) -> None:
    """Say that pass ``number`` is next (``before-N``) and wait until the test lets it start (``go-N``)."""
    (folder / f"before-{number}").touch()
    deadline = time.monotonic() + HANDSHAKE_LIMIT_S
    while not (folder / f"go-{number}").exists():
        assert time.monotonic() < deadline, f"the test never let pass {number} start"
        time.sleep(0.05)


def counters(llm: Any) -> dict[str, float]:
    """The engine's counters and gauges whose names speak of offloading (kvcontract's own included), the prefix cache or preemption."""
    from vllm.v1.metrics.reader import Counter, Gauge

    found: dict[str, float] = {}
    for metric in llm.get_metrics():
        if isinstance(metric, (Counter, Gauge)) and any(
            word in metric.name for word in ("offload", "prefix_cache", "preempt", "kvcontract")
        ):
            found[metric.name] = found.get(metric.name, 0.0) + float(metric.value)
    return found


def main(run_path: str, out_path: str) -> None:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process, where the control reaches it
    run = json.loads(Path(run_path).read_text())
    if run.get("control") == "zero_loaded_blocks":
        zero_loaded_blocks()
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig
    from vllm.inputs import TokensPrompt

    options: dict[str, Any] = {}
    if run["offload"] is not None:
        options["kv_transfer_config"] = KVTransferConfig(
            kv_connector="OffloadingConnector", kv_role="kv_both", kv_connector_extra_config=run["offload"]
        )
    llm = LLM(
        model=run["model"],
        skip_tokenizer_init=True,
        block_size=run["block_size"],
        dtype="float32",
        enforce_eager=True,
        num_gpu_blocks_override=run["gpu_blocks"],
        max_model_len=run["max_model_len"],
        max_num_seqs=run["max_num_seqs"],
        max_num_batched_tokens=run["max_num_batched_tokens"],
        seed=0,
        disable_log_stats=False,
        enable_prefix_caching=True,
        gpu_memory_utilization=run["memory_fraction"],
        **options,
    )
    sampling = SamplingParams(temperature=0.0, max_tokens=run["max_tokens"], ignore_eos=True)
    passes: list[dict[str, Any]] = []
    for number, prompts in enumerate(run["passes"]):
        if number and run["handshake"]:
            between_passes(Path(out_path).parent, number)
        outputs = llm.generate(  # pyright: ignore[reportUnknownMemberType]  (vLLM leaves its tqdm type open)
            [TokensPrompt(prompt_token_ids=prompt) for prompt in prompts], sampling, use_tqdm=False
        )
        tokens = [list(output.outputs[0].token_ids) for output in outputs]
        passes.append({"tokens": tokens, "counters": counters(llm)})
        if run["reset_prefix_cache"]:
            assert llm.reset_prefix_cache(), "vLLM did not reset its prefix cache"
    Path(out_path).write_text(json.dumps({"passes": passes}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
