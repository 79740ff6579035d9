"""One run of vLLM's real engine, in a process of its own: ``python -m tests.engines.engine_run RUN.json OUT.json``.

The tests start a process per engine, so each engine gets a clean vLLM (its global state, its
KV cache) and a crash or a hang is the test's failure, not the test run's. The engine core runs
in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), where the control can reach its worker.
``RUN.json`` holds an :class:`EngineRun`'s fields; ``OUT.json`` gets every pass's token ids and the
engine's offloading and prefix-cache counters after each pass (and, with ``record_groups``, what
kvcontract moved per KV-cache group: :class:`GroupLedger`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from typing_extensions import override
from vllm.v1.kv_offload.base import CanonicalKVCaches

from kvcontract.contracts import (
    GPULoadStoreSpec,
    LoadStoreSpec,
    OffloadingWorker,
    OffloadKey,
    TransferResult,
    offload_key_group,
)

HANDSHAKE_LIMIT_S = 300.0
"""Guard against a hang only: the test acts between passes within seconds."""


class WatchingWorker(OffloadingWorker):
    """``inner``'s worker, which calls :meth:`finished` with the GPU side of each job that succeeds."""

    def __init__(self, inner: OffloadingWorker) -> None:
        self._inner = inner
        self._jobs: dict[int, tuple[bool, GPULoadStoreSpec]] = {}

    def finished(self, load: bool, gpu: GPULoadStoreSpec) -> None:
        """A job is done: a load into ``gpu``'s blocks, or a store from them."""

    @override
    def submit_store(self, job_id: int, src: GPULoadStoreSpec, dst: LoadStoreSpec) -> bool:
        self._jobs[job_id] = (False, src)
        return self._inner.submit_store(job_id, src, dst)

    @override
    def submit_load(self, job_id: int, src: LoadStoreSpec, dst: GPULoadStoreSpec) -> bool:
        self._jobs[job_id] = (True, dst)
        return self._inner.submit_load(job_id, src, dst)

    @override
    def get_finished(self) -> list[TransferResult]:
        results = self._inner.get_finished()
        for result in results:
            job = self._jobs.pop(result.job_id, None)
            if job is not None and result.success:
                self.finished(*job)
        return results

    @override
    def wait(self, job_ids: Collection[int]) -> None:
        self._inner.wait(job_ids)

    @override
    def shutdown(self) -> None:
        self._inner.shutdown()


class ZeroingWorker(WatchingWorker):
    """The control's worker: ``inner``'s, but every block it loads into ``kv_caches`` is zeroed once the load is done."""

    def __init__(self, inner: OffloadingWorker, kv_caches: list[list[torch.Tensor]]) -> None:
        super().__init__(inner)
        self._kv_caches = kv_caches

    @override
    def finished(self, load: bool, gpu: GPULoadStoreSpec) -> None:
        if load:
            ids = torch.tensor(gpu.block_ids, dtype=torch.long)
            for group in self._kv_caches:
                for tensor in group:
                    tensor.index_fill_(0, ids, 0)


def wrap_worker(wrap: Callable[[OffloadingWorker, list[list[torch.Tensor]]], OffloadingWorker]) -> None:
    """kvcontract's vLLM worker drives ``wrap(inner, its KV caches per group)`` in this process."""
    from kvcontract.integrations.vllm import worker as adapter

    build = adapter.KVContractOffloadingWorker.__init__

    def wrapped(
        self: adapter.KVContractOffloadingWorker,
        inner: OffloadingWorker,
        kv_caches: CanonicalKVCaches,
        *,
        blocks_per_offload_block: int = 1,
    ) -> None:
        control = wrap(inner, adapter.group_tensors(kv_caches))
        build(self, control, kv_caches, blocks_per_offload_block=blocks_per_offload_block)

    setattr(adapter.KVContractOffloadingWorker, "__init__", wrapped)


def zero_loaded_blocks() -> None:
    """The control: kvcontract's vLLM worker drives a :class:`ZeroingWorker` in this process."""
    wrap_worker(ZeroingWorker)


@dataclass
class GroupLedger:
    """Per KV-cache group (vLLM's index): the layers, the bytes of one block, the bytes kvcontract's worker
    stored and loaded, and the end token (vLLM's position of the key in its request) of every block
    stored or loaded; and the bytes of an offload block vLLM reports to the spec (sizes become blocks of it)."""

    layers: list[list[str]] = field(default_factory=list[list[str]])
    block_bytes: list[int] = field(default_factory=list[int])
    spec_block_bytes: int = 0
    stored_bytes: dict[int, int] = field(default_factory=dict[int, int])
    loaded_bytes: dict[int, int] = field(default_factory=dict[int, int])
    stored_ends: dict[int, list[int]] = field(default_factory=dict[int, list[int]])
    loaded_ends: dict[int, list[int]] = field(default_factory=dict[int, list[int]])

    def add_bytes(self, done: dict[int, int], group_sizes: Sequence[int]) -> None:
        for group, blocks in enumerate(group_sizes):
            done[group] = done.get(group, 0) + blocks * self.block_bytes[group]

    def add_ends(self, ends: dict[int, list[int]], keys: Sequence[bytes], position: Callable[[Any], Any]) -> None:
        for key in keys:
            ends.setdefault(offload_key_group(OffloadKey(key)), []).append(int(position(key)))

    def as_json(self) -> dict[str, Any]:
        groups = range(len(self.layers))
        moved = {"stored_bytes": self.stored_bytes, "loaded_bytes": self.loaded_bytes}
        ends = {"stored_ends": self.stored_ends, "loaded_ends": self.loaded_ends}
        return {
            "layers": self.layers,
            "block_bytes": self.block_bytes,
            "spec_block_bytes": self.spec_block_bytes,
            **{name: [value.get(group, 0) for group in groups] for name, value in moved.items()},
            **{name: [value.get(group, []) for group in groups] for name, value in ends.items()},
        }


LEDGER = GroupLedger()


class RecordingWorker(WatchingWorker):
    """``inner``'s worker, adding the bytes of every finished job to :data:`LEDGER` per KV-cache group."""

    def __init__(self, inner: OffloadingWorker, kv_caches: list[list[torch.Tensor]]) -> None:
        super().__init__(inner)
        LEDGER.block_bytes = [sum(tensor[0].nbytes for tensor in group) for group in kv_caches]

    @override
    def finished(self, load: bool, gpu: GPULoadStoreSpec) -> None:
        LEDGER.add_bytes(LEDGER.loaded_bytes if load else LEDGER.stored_bytes, gpu.group_sizes)


def record_groups() -> None:
    """Fill :data:`LEDGER`: the groups' layers from the spec, each stored or loaded key's end token from the
    scheduler side, the bytes from the worker side (the engine core runs in this process)."""
    from kvcontract.integrations.vllm import manager, spec
    from kvcontract.integrations.vllm.capacity import offload_block_bytes

    get_manager = spec.KVContractOffloadingSpec.get_manager
    prepare_store = manager.KVContractOffloadingManager.prepare_store
    prepare_load = manager.KVContractOffloadingManager.prepare_load

    def recorded_manager(self: spec.KVContractOffloadingSpec) -> manager.KVContractOffloadingManager:
        LEDGER.layers = [list(group.layer_names) for group in self.config.groups]
        LEDGER.spec_block_bytes = offload_block_bytes(self.config)
        return get_manager(self)

    def recorded_store(self: manager.KVContractOffloadingManager, keys: Any, req_context: Any) -> Any:
        output = prepare_store(self, keys, req_context)
        if output is not None:
            LEDGER.add_ends(LEDGER.stored_ends, output.keys_to_store, req_context.get_offload_key_position)
        return output

    def recorded_load(self: manager.KVContractOffloadingManager, keys: Any, req_context: Any) -> Any:
        LEDGER.add_ends(LEDGER.loaded_ends, list(keys), req_context.get_offload_key_position)
        return prepare_load(self, keys, req_context)

    setattr(spec.KVContractOffloadingSpec, "get_manager", recorded_manager)
    setattr(manager.KVContractOffloadingManager, "prepare_store", recorded_store)
    setattr(manager.KVContractOffloadingManager, "prepare_load", recorded_load)
    wrap_worker(RecordingWorker)


def between_passes(folder: Path, number: int) -> None:
    """Say that pass ``number`` is next (``before-N``) and wait until the test lets it start (``go-N``)."""
    (folder / f"before-{number}").touch()
    deadline = time.monotonic() + HANDSHAKE_LIMIT_S
    while not (folder / f"go-{number}").exists():
        assert time.monotonic() < deadline, f"the test never let pass {number} start"
        time.sleep(0.05)


def counters(llm: Any) -> dict[str, float]:
    """The engine's counters and gauges whose names speak of offloading, the prefix cache or preemption."""
    from vllm.v1.metrics.reader import Counter, Gauge

    found: dict[str, float] = {}
    for metric in llm.get_metrics():
        if isinstance(metric, (Counter, Gauge)) and any(
            word in metric.name for word in ("offload", "prefix_cache", "preempt")
        ):
            found[metric.name] = found.get(metric.name, 0.0) + float(metric.value)
    return found


def main(run_path: str, out_path: str) -> None:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process, where the control reaches it
    run = json.loads(Path(run_path).read_text())
    if run.get("control") == "zero_loaded_blocks":
        zero_loaded_blocks()
    if run["record_groups"]:
        record_groups()
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
        **run["engine_options"],
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
        groups = LEDGER.as_json() if run["record_groups"] else None
        passes.append({"tokens": tokens, "counters": counters(llm), "groups": groups})
        if run["reset_prefix_cache"]:
            assert llm.reset_prefix_cache(), "vLLM did not reset its prefix cache"
    Path(out_path).write_text(json.dumps({"passes": passes}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
