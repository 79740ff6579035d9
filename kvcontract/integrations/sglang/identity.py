"""The block identity of an SGLang rank, derived from ``HiCacheStorageConfig`` and the host pool.

SGLang's page keys are SHA-256 chains of token ids with no model, dtype, layout or rank in
them, so the identity carries those: SGLang's model name (tagged with the pool's page format
where it has one), the pool's dtype, layers, heads, head size, page size and host layout,
the bytes of a tier block, TP/PP/CP rank and size, and whether the model is MLA. MLA's KV is
the same on every TP rank (one writer stores it, every rank reads it), so its identity leaves
the TP position out; every other rank keeps its own pages. A hybrid model's pools beside the KV
pool (sliding-window KV, Mamba state, the DSA indexer, ...) each have an identity of their own:
the KV pool's facts plus the pool's name and what one of its pages holds (state shapes and
dtypes), so pages of another pool, or of the same pool laid out otherwise, never load. The
Mamba state is TP-sharded even beside MLA, so its identity keeps the TP position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvcontract.config import ConfigError, IdentityConfig
from kvcontract.contracts import BlockIdentity
from kvcontract.integrations.sglang.hicache_api import HiCacheStorageConfig
from kvcontract.integrations.sglang.options import SOURCE

__all__ = ["PoolGeometry", "pool_geometry", "replicated", "sglang_identity"]

_KV_POOL = "kv"
_PAGE_FACTS = (
    "temporal_state_shape",
    "temporal_dtype",
    "conv_state_shapes",
    "conv_dtype",
    "num_mamba_layers",
    "indexer_page_stride_size",
    "indexer_dtype",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "v_head_dim",
)
"""Attributes of SGLang's side pools that say what one page holds; those a pool has enter its identity."""
_FROM_SGLANG = ("model", "tp_size", "tp_rank", "pp_size", "pp_rank", "cp_size", "cp_rank")
"""Identity fields SGLang's config decides; the backend's config leaves them out."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolGeometry:
    """The host pool's facts that enter the identity, read once from SGLang's pool."""

    layout: str
    dtype: str
    layers: int
    heads: int
    head_dim: int
    page_size: int
    regions: int
    pool: str = _KV_POOL
    """SGLang's name of the pool (``kv``, ``swa``, ``mamba``, ``indexer``, ...)."""
    page_facts: str = ""
    """What a page of a side pool holds (its state shapes and dtypes), as SGLang's pool reports it."""


def replicated(pool: str, config: HiCacheStorageConfig) -> bool:
    """Whether pool ``pool``'s pages are the same on every TP rank: MLA's, but for the TP-sharded Mamba state (as SGLang's own backends key it)."""
    return config.is_mla_model and pool != "mamba"


def pool_geometry(name: str, host_pool: Any, regions: int) -> PoolGeometry:
    """The identity facts of SGLang's host pool ``host_pool`` named ``name``, read once from the pool."""
    facts = [f"{fact}={getattr(host_pool, fact)}" for fact in _PAGE_FACTS if hasattr(host_pool, fact)]
    layers = getattr(host_pool, "layer_num", 0) or getattr(host_pool, "num_mamba_layers", 0)
    return PoolGeometry(
        layout=host_pool.layout,
        dtype=str(host_pool.dtype).removeprefix("torch."),
        layers=int(layers),
        heads=int(getattr(host_pool, "head_num", 1)),
        head_dim=int(getattr(host_pool, "head_dim", 0) or getattr(host_pool, "kv_cache_dim", 0)),
        page_size=int(host_pool.page_size),
        regions=regions,
        pool=str(name),
        page_facts="; ".join(facts) if name != _KV_POOL else "",
    )


def sglang_identity(
    config: HiCacheStorageConfig, pool: PoolGeometry, named: IdentityConfig, block_bytes: int
) -> BlockIdentity:
    """The identity of the ``block_bytes``-byte blocks this rank of the model ``config`` describes writes and reads."""
    defaults = IdentityConfig()
    given = [name for name in _FROM_SGLANG if getattr(named, name) != getattr(defaults, name)]
    if given:
        raise ConfigError(
            SOURCE,
            [f"kvcontract.identity.{name}: SGLang's config sets it under SGLang; leave it out" for name in given],
        )
    mla = config.is_mla_model
    shared = replicated(pool.pool, config)
    side = () if pool.pool == _KV_POOL else (("pool", pool.pool), ("page", pool.page_facts))
    return BlockIdentity(
        model=config.model_name or "",
        revision=named.revision,
        dtype=pool.dtype,
        num_layers=pool.layers,
        num_kv_heads=pool.heads,
        head_dim=pool.head_dim,
        block_tokens=pool.page_size,
        offload_block_tokens=pool.page_size,
        block_bytes=block_bytes,
        kv_quantization=named.kv_quantization,
        tp_size=1 if shared else config.tp_size,
        tp_rank=0 if shared else config.tp_rank,
        pp_size=config.pp_size,
        pp_rank=config.pp_rank,
        cp_size=config.attn_cp_size,
        cp_rank=config.attn_cp_rank,
        hash_scheme=named.hash_scheme or "sglang",
        namespace=named.namespace,
        layout_details=(
            ("engine", "sglang"),
            ("host_layout", pool.layout),
            ("mla", str(mla)),
            ("regions_per_page", str(pool.regions)),
            ("dcp", f"{config.dcp_rank}/{config.dcp_size}"),
            *side,
        ),
    )
