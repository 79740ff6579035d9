"""A model with a recurrent state (Mamba, linear attention) beside attention: its state pages offload exactly.

vLLM's CPU build runs no such model (docs/vllm.md "Hybrid models": a tiny Mamba stops at a kernel
the build lacks, a tiny Mamba 2 with prefix caching at an ``IndexError`` of its checkpoint path),
so the state group is tested here through vLLM's own modules: its worker-side connector registers
an attention group and a Mamba group whose state (a convolution and an SSM state, 704 bytes) is
padded to the attention page, as vLLM lays out a hybrid model, and kvcontract's worker stores a
job holding blocks of both groups and loads it into other blocks, byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import torch
from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole
from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import OffloadingConnectorMetadata, TransferJob
from vllm.distributed.kv_transfer.kv_connector.v1.offloading_connector import OffloadingConnector
from vllm.v1.kv_cache_interface import (
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheTensor,
    MambaSpec,
    compute_layer_kv_cache_shape_bytes,
)
from vllm.v1.kv_offload.base import GPULoadStoreSpec as VLLMGPULoadStoreSpec

from kvcontract.contracts import BlockIdsSpec
from kvcontract.integrations.vllm import KVContractHostSpec, KVContractOffloadingWorker
from tests.integrations.vllm.support import (
    BLOCK_TOKENS,
    KV_SPEC,
    PAGE_BYTES,
    SPEC_PATH,
    model_dir,
    run_jobs,
    vllm_config,
)

NUM_BLOCKS = 32
CONV, SSM = (3, 32), (2, 16, 8)
"""The Mamba layer's two states per block, float16: 192 and 512 bytes."""
MAMBA = MambaSpec(
    block_size=BLOCK_TOKENS,
    shapes=(CONV, SSM),
    dtypes=(torch.float16, torch.float16),
    page_size_padded=PAGE_BYTES,
    mamba_cache_mode="align",
)


def hybrid_caches() -> tuple[KVCacheConfig, dict[str, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """An attention layer (group 0) and a Mamba layer (group 1) in vLLM's canonical form, each over its
    own pages of ``PAGE_BYTES`` (returned as rows); the Mamba layer's view is its state's bytes at the
    start of each padded page."""
    config = KVCacheConfig(
        num_blocks=NUM_BLOCKS,
        kv_cache_tensors=[
            KVCacheTensor(
                size=PAGE_BYTES * NUM_BLOCKS,
                layers=[name],
                layer_stride=PAGE_BYTES * NUM_BLOCKS,
                block_stride=PAGE_BYTES,
            )
            for name in ("layer.0", "layer.1")
        ],
        kv_cache_groups=[KVCacheGroupSpec(["layer.0"], KV_SPEC), KVCacheGroupSpec(["layer.1"], MAMBA)],
    )
    generator = torch.Generator().manual_seed(0)
    attention, mamba = (
        torch.randint(0, 256, (NUM_BLOCKS, PAGE_BYTES), dtype=torch.uint8, generator=generator) for _ in range(2)
    )
    caches = {
        "layer.0": attention.view(compute_layer_kv_cache_shape_bytes(KV_SPEC, NUM_BLOCKS)),
        "layer.1": mamba[:, : MAMBA.state_content_size_bytes].view(
            compute_layer_kv_cache_shape_bytes(MAMBA, NUM_BLOCKS)
        ),
    }
    return config, caches, (attention, mamba)


def test_a_recurrent_state_group_stores_and_loads_byte_exact_beside_attention(tmp_path: Path) -> None:
    kv_config, caches, pages = hybrid_caches()
    config = vllm_config(
        model_dir(tmp_path), {**SPEC_PATH, "kvcontract": {"manager": {"capacity": 8}}}, num_blocks=NUM_BLOCKS
    )
    connector = OffloadingConnector(config, KVConnectorRole.WORKER, kv_config)
    connector.register_kv_caches(caches)
    assert connector.connector_worker is not None
    assert isinstance(connector.connector_worker.worker, KVContractOffloadingWorker)
    attention, mamba = pages
    untouched = attention.clone(), mamba.clone()
    host = KVContractHostSpec(BlockIdsSpec([5, 2, 7]))
    # GPU blocks 3, 4 of the attention group, then the state of block 9 of the Mamba group
    store = TransferJob("r", VLLMGPULoadStoreSpec([3, 4, 9], [2, 1], [0, 0]), host)
    assert run_jobs(connector, OffloadingConnectorMetadata(load_jobs={}, store_jobs={1: store})) == {1: True}
    stored = attention[[3, 4]].clone(), mamba[[9]].clone()
    load = TransferJob("r", host, VLLMGPULoadStoreSpec([20, 21, 22], [2, 1], [0, 0]))
    assert run_jobs(connector, OffloadingConnectorMetadata(load_jobs={2: load}, store_jobs={})) == {2: True}
    assert torch.equal(attention[[20, 21]], stored[0])
    assert torch.equal(mamba[[22]], stored[1])
    # each group's rows went to its own tensor: nothing else moved
    assert torch.equal(attention[[22]], untouched[0][[22]]) and torch.equal(mamba[[20, 21]], untouched[1][[20, 21]])
