"""What else names an engine's blocks beside its layout: model, ranks and namespace."""

from __future__ import annotations

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
)

from kvcontract.config.base import ConfigModel
from kvcontract.config.limits import ConfigLimits


class IdentityConfig(ConfigModel):
    """What names this engine's blocks beside ``kv_layout``: the model, its parallel position, the hash scheme.

    Every persistent or shared tier keeps blocks of each identity apart (see
    :class:`kvcontract.contracts.BlockIdentity`). Set ``model`` when models of one layout
    share a tier; engine adapters (vLLM) set model, ranks and hash scheme from the engine
    themselves. ``namespace`` separates engines that would otherwise share blocks.
    """

    model: str = Field(
        default="", max_length=ConfigLimits.MAX_NAME_CHARS, description="Model name, e.g. meta-llama/Llama-3.1-8B."
    )
    revision: str = Field(default="", max_length=ConfigLimits.MAX_NAME_CHARS)
    kv_quantization: str = Field(
        default="", max_length=ConfigLimits.MAX_NAME_CHARS, description="KV-cache quantization scheme, if any."
    )
    hash_scheme: str = Field(
        default="", max_length=ConfigLimits.MAX_NAME_CHARS, description="How the engine hashes blocks into keys."
    )
    namespace: str = Field(default="", max_length=ConfigLimits.MAX_NAME_CHARS)
    tp_size: int = Field(default=1, ge=1, le=ConfigLimits.MAX_PARALLEL)
    tp_rank: int = Field(default=0, ge=0)
    pp_size: int = Field(default=1, ge=1, le=ConfigLimits.MAX_PARALLEL)
    pp_rank: int = Field(default=0, ge=0)
    cp_size: int = Field(default=1, ge=1, le=ConfigLimits.MAX_PARALLEL)
    cp_rank: int = Field(default=0, ge=0)

    @field_validator("tp_rank", "pp_rank", "cp_rank")
    @classmethod
    def _rank_within_size(cls, rank: int, info: ValidationInfo) -> int:
        axis = str(info.field_name).removesuffix("_rank")
        size = info.data.get(f"{axis}_size")
        if isinstance(size, int) and rank >= size:
            raise ValueError(f"{axis}_rank ({rank}) must be below {axis}_size ({size})")
        return rank
