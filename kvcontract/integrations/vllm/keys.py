"""The one place where vLLM's loose key collections become the contract's ``Sequence``.

vLLM types key parameters as ``Collection`` (its scheduler passes lists, but may pass
sets or views); kvcontract's contract says ``Sequence`` where a manager may index or
pass twice. Each adapter call converts once, here: a list or tuple goes on as it is,
anything else becomes one tuple, so no set or generator ever reaches a kvcontract
manager. The keys themselves need no conversion: vLLM's and kvcontract's ``OffloadKey``
are the same bytes (block hash, then the 4-byte big-endian group index).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TypeVar, cast

from vllm.v1.kv_offload.base import OffloadKey as VLLMOffloadKey

from kvcontract.contracts import OffloadKey

__all__ = ["as_contract_keys", "as_key_list", "as_key_sequence", "as_vllm_keys"]

_Key = TypeVar("_Key", bound=bytes)


def as_key_sequence(keys: Collection[_Key]) -> Sequence[_Key]:
    """``keys`` as a ``Sequence`` of the same keys: lists and tuples as they are, else one tuple."""
    return keys if isinstance(keys, (list, tuple)) else tuple(keys)


def as_contract_keys(keys: Collection[VLLMOffloadKey]) -> Sequence[OffloadKey]:
    """``keys`` as a ``Sequence`` of kvcontract keys: lists and tuples as they are, else one tuple."""
    return cast("Sequence[OffloadKey]", as_key_sequence(keys))  # same bytes in both NewTypes (module docstring)


def as_key_list(keys: Sequence[_Key]) -> list[_Key]:
    """``keys`` as the ``list`` vLLM's values hold: a list as it is, else one new list."""
    return keys if isinstance(keys, list) else list(keys)


def as_vllm_keys(keys: Sequence[OffloadKey]) -> list[VLLMOffloadKey]:
    """kvcontract keys as the ``list`` vLLM's values hold: a list as it is, else one new list."""
    return cast("list[VLLMOffloadKey]", as_key_list(keys))  # same bytes in both NewTypes (module docstring)
