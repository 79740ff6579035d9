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
from pathlib import Path
from typing import Any

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"


def zero_loaded_blocks() -> None:
    """The control: every block kvcontract loads into the KV cache is zeroed once its load is done."""
    import torch
    from vllm.v1.kv_offload.base import CanonicalKVCaches

    from kvcontract.contracts import GPULoadStoreSpec, OffloadingWorker
    from kvcontract.integrations.vllm import worker as adapter

    original_init = adapter.KVContractOffloadingWorker.__init__
    original_submit = adapter.KVContractOffloadingWorker.submit_load
    original_finished = adapter.KVContractOffloadingWorker.get_finished
    tensors: list[list[torch.Tensor]] = []
    loads: dict[int, GPULoadStoreSpec] = {}

    def init(
        self: adapter.KVContractOffloadingWorker, inner: OffloadingWorker, kv_caches: CanonicalKVCaches, **kwargs: Any
    ) -> None:
        original_init(self, inner, kv_caches, **kwargs)
        tensors.extend(adapter.group_tensors(kv_caches))

    def submit_load(
        self: adapter.KVContractOffloadingWorker, job_id: int, src_spec: Any, device_ptrs: Any, expedited: bool = False
    ) -> bool:
        target = self._device_side(job_id, device_ptrs)
        if target is not None:
            loads[job_id] = target
        return original_submit(self, job_id, src_spec, device_ptrs, expedited)

    def get_finished(self: adapter.KVContractOffloadingWorker) -> list[Any]:
        results = original_finished(self)
        for result in results:
            target = loads.pop(result.job_id, None)
            if target is not None and result.success:
                ids = torch.as_tensor(list(target.block_ids), dtype=torch.long)
                for group in tensors:
                    for tensor in group:
                        tensor.index_fill_(0, ids, 0)
        return results

    adapter.KVContractOffloadingWorker.__init__ = init  # type: ignore[method-assign]
    adapter.KVContractOffloadingWorker.submit_load = submit_load  # type: ignore[method-assign]
    adapter.KVContractOffloadingWorker.get_finished = get_finished  # type: ignore[method-assign]


def counters(llm: Any) -> dict[str, float]:
    """The engine's counters and gauges whose names speak of offloading or the prefix cache."""
    from vllm.v1.metrics.reader import Counter, Gauge

    found: dict[str, float] = {}
    for metric in llm.get_metrics():
        if isinstance(metric, (Counter, Gauge)) and ("offload" in metric.name or "prefix_cache" in metric.name):
            found[metric.name] = found.get(metric.name, 0.0) + float(metric.value)
    return found


def main(run_path: str, out_path: str) -> None:
    run = json.loads(Path(run_path).read_text())
    if run.get("control") == "zero_loaded_blocks":
        zero_loaded_blocks()
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig

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
    for prompts in run["passes"]:
        outputs = llm.generate([{"prompt_token_ids": prompt} for prompt in prompts], sampling, use_tqdm=False)
        tokens = [list(output.outputs[0].token_ids) for output in outputs]
        passes.append({"tokens": tokens, "counters": counters(llm)})
        if run["reset_prefix_cache"]:
            assert llm.reset_prefix_cache(), "vLLM did not reset its prefix cache"
    Path(out_path).write_text(json.dumps({"passes": passes}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
