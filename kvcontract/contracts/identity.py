"""The identity of a block: everything that must match for one engine to reuse another's offloaded KV.

A block's bytes mean something only to an engine of the same model, KV layout, parallel
position and block-hash scheme. Every persistent or shared tier stores the identity's
:attr:`BlockIdentity.fingerprint` with each value and treats any other as a miss, so one
model's KV never reaches another. The fingerprint hashes a canonical JSON text (never
``hash()``), so it is the same in every process, on every machine and Python version.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

__all__ = ["IDENTITY_SCHEME", "FINGERPRINT_BYTES", "BlockIdentity"]

IDENTITY_SCHEME = "kvcontract.identity/1"
"""Enters every fingerprint: a change of what the identity holds gets a new scheme, so old fingerprints never match."""
FINGERPRINT_BYTES = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockIdentity:
    """Model, KV layout, parallel position, block-hash scheme and namespace a block was written under.

    Blocks are interchangeable only between equal identities. ``num_kv_heads`` and
    ``head_dim`` are 0 where the engine does not say them (``block_bytes`` and
    ``layout_details`` then pin the layout); ``layout_details`` holds an engine's own layout
    facts (vLLM's KV-cache groups, SGLang's host layout) as name/value pairs. Data-parallel
    replicas hold the same KV for the same tokens, so the data-parallel rank is not part of it.
    """

    model: str
    revision: str = ""
    dtype: str
    num_layers: int
    num_kv_heads: int
    head_dim: int
    block_tokens: int
    offload_block_tokens: int
    block_bytes: int
    kv_quantization: str = ""
    tp_size: int = 1
    tp_rank: int = 0
    pp_size: int = 1
    pp_rank: int = 0
    cp_size: int = 1
    cp_rank: int = 0
    hash_scheme: str = ""
    namespace: str = ""
    layout_details: tuple[tuple[str, str], ...] = ()
    _fingerprint: bytes = field(init=False, repr=False, compare=False, default=b"")

    def __post_init__(self) -> None:
        problems = [
            f"{name} must be at least 1, got {value}"
            for name, value in (
                ("num_layers", self.num_layers),
                ("block_tokens", self.block_tokens),
                ("offload_block_tokens", self.offload_block_tokens),
                ("block_bytes", self.block_bytes),
                ("tp_size", self.tp_size),
                ("pp_size", self.pp_size),
                ("cp_size", self.cp_size),
            )
            if value < 1
        ]
        problems += [
            f"{name} must be 0 (not known) or more, got {value}"
            for name, value in (("num_kv_heads", self.num_kv_heads), ("head_dim", self.head_dim))
            if value < 0
        ]
        problems += [
            f"{axis}_rank must be in [0, {size}), got {rank}"
            for axis, rank, size in (
                ("tp", self.tp_rank, self.tp_size),
                ("pp", self.pp_rank, self.pp_size),
                ("cp", self.cp_rank, self.cp_size),
            )
            if not 0 <= rank < size
        ]
        if problems:
            raise ValueError(f"BlockIdentity: {'; '.join(problems)}")
        object.__setattr__(self, "layout_details", tuple(sorted(self.layout_details)))
        digest = hashlib.blake2b(self.canonical().encode(), digest_size=FINGERPRINT_BYTES).digest()
        object.__setattr__(self, "_fingerprint", digest)

    @property
    def fingerprint(self) -> bytes:
        """16 bytes that stand for every field: equal identities, equal fingerprints."""
        return self._fingerprint

    @property
    def fingerprint_hex(self) -> str:
        """The fingerprint as 32 hex digits: a tier's directory or key prefix."""
        return self._fingerprint.hex()

    def canonical(self) -> str:
        """The JSON text the fingerprint hashes: sorted keys, no spaces, the scheme included."""
        return json.dumps(
            {"scheme": IDENTITY_SCHEME, **self.as_dict()}, sort_keys=True, separators=(",", ":"), ensure_ascii=True
        )

    def as_dict(self) -> dict[str, object]:
        """Every field by name, ``layout_details`` as a mapping: what ``kvcontract config show`` prints."""
        fields: dict[str, object] = asdict(self)
        del fields["_fingerprint"]
        fields["layout_details"] = dict(self.layout_details)
        return fields
