"""Reading Mooncake-format traces: one JSON object per line, each a request and its prefix block ids.

A line holds ``timestamp`` (ms from the start), ``input_length`` and ``output_length``
(tokens) and ``hash_ids``, the request's prefix block hashes in order; equal ids are the
same block. Only ``hash_ids`` is required. A bad line raises ``TraceFormatError`` naming
the file and the line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeGuard

from kvcontract.contracts import OffloadKey, make_offload_key

__all__ = ["TraceFormatError", "TraceRequest", "block_key", "iter_trace", "read_trace"]

_ID_BYTES = 8
_ID_LIMIT = 2 ** (8 * _ID_BYTES)
_COUNTS = ("timestamp", "input_length", "output_length")


class TraceFormatError(ValueError):
    """A trace line that is not a Mooncake request; the message starts with ``file:line:``."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace: its prefix block hash ids, arrival time (ms) and lengths (tokens)."""

    hash_ids: tuple[int, ...]
    timestamp: int = 0
    input_length: int = 0
    output_length: int = 0


def block_key(hash_id: int) -> OffloadKey:
    """The offload key of trace block ``hash_id``: its 8-byte big-endian form, KV-cache group 0."""
    return make_offload_key(hash_id.to_bytes(_ID_BYTES, "big"))


def read_trace(path: str | os.PathLike[str]) -> list[TraceRequest]:
    """Every request of the trace at ``path``, in file order."""
    return list(iter_trace(path))


def iter_trace(path: str | os.PathLike[str]) -> Iterator[TraceRequest]:
    """The requests of the trace at ``path``, one at a time; blank lines are skipped."""
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                yield _parse(line, f"{os.fspath(path)}:{number}")


def _parse(line: str, where: str) -> TraceRequest:
    try:
        record: object = json.loads(line)
    except json.JSONDecodeError as error:
        raise TraceFormatError(f"{where}: not valid JSON ({error.msg} at column {error.colno})") from None
    if not _is_json_object(record):
        raise TraceFormatError(f"{where}: expected a JSON object with 'hash_ids', got {type(record).__name__}")
    hash_ids = _block_ids(record.get("hash_ids"))
    if hash_ids is None:
        raise TraceFormatError(
            f"{where}: 'hash_ids' must be a list of integers in [0, 2**64), got {record.get('hash_ids')!r:.80}"
        )
    counts: list[int] = []
    for name in _COUNTS:
        value = record.get(name, 0)
        if type(value) is not int or value < 0:
            raise TraceFormatError(f"{where}: {name!r} must be a non-negative integer, got {value!r}")
        counts.append(value)
    return TraceRequest(hash_ids, *counts)


def _block_ids(value: object) -> tuple[int, ...] | None:
    """``value`` as block ids if it is a list of integers in [0, 2**64), else ``None``."""
    if not _is_json_array(value):
        return None
    ids: list[int] = []
    for item in value:
        if type(item) is not int or not 0 <= item < _ID_LIMIT:
            return None
        ids.append(item)
    return tuple(ids)


def _is_json_object(value: object) -> TypeGuard[dict[str, object]]:
    """Whether decoded JSON ``value`` is an object (JSON object keys are always strings)."""
    return isinstance(value, dict)


def _is_json_array(value: object) -> TypeGuard[list[object]]:
    """Whether decoded JSON ``value`` is an array."""
    return isinstance(value, list)
