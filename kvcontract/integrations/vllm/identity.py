"""The block identity of a vLLM engine, derived from the ``OffloadingConfig`` vLLM hands its offloading spec.

A user who sets nothing cannot mix models: vLLM's model name, KV-cache dtype, KV-cache groups
(their layers, tokens per block, sliding windows), bytes per block, host layout and the
worker's parallel position all enter the identity, so engines of one model and layout
share blocks and any other engine's are misses. vLLM does not hand its offloading backends
the model's revision, so the revision is what the model directory holds
(:func:`~kvcontract.integrations.model_files.model_revision`: its config and a sample of its
weights, or a hub snapshot's commit): other weights at one path are another identity. The
kvcontract config's ``identity.revision`` replaces it where nothing on disk tells (a loader
that changes weights), and ``identity.hash_scheme`` records vLLM's prefix-caching hash
algorithm where a fleet mixes them (keys hashed by different algorithms differ in any case).
"""

from __future__ import annotations

import hashlib

from vllm.v1.kv_offload.config import OffloadingConfig

from kvcontract.config import ConfigError, IdentityConfig, KVContractConfig
from kvcontract.contracts import BlockIdentity
from kvcontract.integrations.model_files import model_revision
from kvcontract.integrations.vllm.releases import sliding_window_in_chunks

__all__ = ["vllm_identity"]

_FROM_VLLM = ("model", "tp_size", "tp_rank", "pp_size", "pp_rank", "cp_size", "cp_rank")
"""Identity fields vLLM's config decides; a kvcontract config under vLLM leaves them out."""


def vllm_identity(config: OffloadingConfig, kvcontract: KVContractConfig, block_bytes: int) -> BlockIdentity:
    """The identity of the ``block_bytes``-byte offload blocks of the engine ``config`` describes."""
    named = kvcontract.identity
    defaults = IdentityConfig()
    given = [name for name in _FROM_VLLM if getattr(named, name) != getattr(defaults, name)]
    if given:
        raise ConfigError(
            "kv_connector_extra_config",
            [f"kvcontract.identity.{name}: vLLM's config sets it under vLLM; leave it out" for name in given],
        )
    parallel = config.parallel
    layout = kvcontract.kv_layout
    groups = config.groups
    layers = sum(len(group.layer_names) for group in groups) or layout.num_layers
    block_tokens = groups[0].tokens_per_block if groups else layout.block_tokens
    return BlockIdentity(
        model=config.model.name,
        revision=named.revision or model_revision(config.model.name),
        dtype=config.model.dtype,
        num_layers=layers,
        num_kv_heads=0,
        head_dim=0,
        block_tokens=block_tokens,
        offload_block_tokens=block_tokens * config.cache.blocks_per_chunk,
        block_bytes=block_bytes,
        kv_quantization=named.kv_quantization,
        tp_size=parallel.tp_size,
        tp_rank=parallel.rank % parallel.tp_size,
        pp_size=parallel.pp_size,
        pp_rank=(parallel.rank // parallel.tp_size) % parallel.pp_size,
        cp_size=parallel.pcp_size,
        hash_scheme=named.hash_scheme or "vllm",
        namespace=named.namespace,
        layout_details=(
            ("engine", "vllm"),
            (
                "groups",
                ";".join(
                    _group(group.group_id, group.tokens_per_block, group.layer_names, sliding_window_in_chunks(group))
                    for group in groups
                ),
            ),
            ("worker_kv_bytes_per_block", str(config.worker_kv_bytes_per_block)),
            ("tokens_per_hash", str(config.cache.tokens_per_hash)),
            ("world_size", str(parallel.world_size)),
            ("rank", str(parallel.rank)),
            ("dcp_size", str(parallel.dcp_size)),
            ("kv_cache_layout", str(config.kv_cache_layout)),
            ("canonical_layout", str(config.canonical_layout)),
            ("replicated_layout", str(config.replicated_layout)),
        ),
    )


def _group(group_id: int, tokens_per_block: int, layer_names: tuple[str, ...], window: int | None) -> str:
    """One KV-cache group as text: its id, tokens per block, window and a digest of its layer names."""
    layers = hashlib.blake2b("\n".join(layer_names).encode(), digest_size=8).hexdigest()
    return f"{group_id}:{tokens_per_block}:{window}:{len(layer_names)}:{layers}"
