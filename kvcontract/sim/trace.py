"""Reading Mooncake-format traces: one JSON object per line, each a request and its prefix block ids.

A line holds ``timestamp`` (ms from the start), ``input_length`` and ``output_length``
(tokens) and ``hash_ids``, the request's prefix block hashes in order; equal ids are the
same block. Only ``hash_ids`` is required. A bad line raises ``TraceFormatError`` naming
the file and the line. Any trace may be gzip-compressed (told by its first bytes, not its
name), and a shipped trace's name (``mooncake-conversation``) reads the package's copy.

A trace is untrusted input: lines must be UTF-8, at most ``MAX_LINE_BYTES`` long, with at
most ``MAX_HASH_IDS`` ids each, so a line never costs more memory than a real request.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import os
import sys
import zlib
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import TypeGuard

from kvcontract.engine_driver.keys import HASH_ID_BYTES
from kvcontract.sim.shipped import shipped_trace

__all__ = [
    "MAX_HASH_IDS",
    "MAX_LINE_BYTES",
    "TraceFormatError",
    "TraceRequest",
    "iter_trace",
    "read_block_lists",
    "read_simulation_requests",
    "read_trace",
]

MAX_HASH_IDS = 65_536
"""Block ids of one request: a context of a million tokens in blocks of 16."""
MAX_LINE_BYTES = 4 << 20
"""Bytes of one trace line: room for ``MAX_HASH_IDS`` ids of 20 digits and the other fields."""

_ID_LIMIT = 2 ** (8 * HASH_ID_BYTES)
_COUNTS = ("timestamp", "input_length", "output_length")
_GZIP_MAGIC = b"\x1f\x8b"


class TraceFormatError(ValueError):
    """A trace line that is not a Mooncake request; the message starts with ``file:line:``."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace: its prefix block hash ids, arrival time (ms) and lengths (tokens)."""

    hash_ids: tuple[int, ...]
    timestamp: int = 0
    input_length: int = 0
    output_length: int = 0


def read_trace(path: str | os.PathLike[str]) -> list[TraceRequest]:
    """Every request of the trace at ``path``, in file order."""
    return list(iter_trace(path))


def read_simulation_requests(path: str | os.PathLike[str], count: int | None, bound: int) -> list[list[int]]:
    """The block ids of the trace's first ``count`` requests, or of all of them (at most ``bound``).

    A trace with no request, or past ``bound`` when no ``count`` is given, is a :class:`TraceFormatError`.
    """
    requests = [list(request.hash_ids) for request in islice(iter_trace(path), count or bound + 1)]
    if len(requests) > bound:
        raise TraceFormatError(
            f"{os.fspath(path)}: more than {bound} requests; give --requests to replay the first ones"
        )
    if not requests:
        raise TraceFormatError(f"{os.fspath(path)}: no requests (the file is empty or every line is blank)")
    return requests


def read_block_lists(path: str | os.PathLike[str]) -> list[tuple[int, ...]]:
    """Each request's block hash ids, from a Mooncake JSONL trace or a CSV of ``request_id,hash_ids``.

    In the CSV the header names a ``hash_ids`` column (``request_id`` and others are optional)
    and each row's ids are separated by spaces; the JSONL form needs only ``hash_ids`` per line.
    """
    if os.fspath(path).lower().removesuffix(".gz").endswith(".csv"):
        return list(_iter_csv(path))
    return [request.hash_ids for request in iter_trace(path)]


def _iter_csv(path: str | os.PathLike[str]) -> Iterator[tuple[int, ...]]:
    csv.field_size_limit(MAX_LINE_BYTES)
    with _opened(path) as raw:
        try:
            rows = csv.DictReader(codecs.iterdecode(raw, "utf-8", errors="strict"))
            if rows.fieldnames is None or "hash_ids" not in rows.fieldnames:
                raise TraceFormatError(f"{os.fspath(path)}:1: a CSV trace needs a header with a hash_ids column")
            for row in rows:
                where = f"{os.fspath(path)}:{rows.line_num}"
                ids = _block_ids(_integers(row.get("hash_ids") or ""))
                if ids is None:
                    raise TraceFormatError(
                        f"{where}: hash_ids must be up to {MAX_HASH_IDS} integers in [0, 2**64) separated by spaces"
                    )
                yield ids
        except (csv.Error, UnicodeDecodeError) as error:
            raise TraceFormatError(f"{os.fspath(path)}: not a readable CSV trace ({error})") from None


def _integers(text: str) -> list[object]:
    """Space-separated decimal integers, or the raw words where one is not (``_block_ids`` refuses those)."""
    return [int(word) if word.isdigit() and len(word) <= 20 else word for word in text.split()]


def iter_trace(path: str | os.PathLike[str]) -> Iterator[TraceRequest]:
    """The requests of the trace at ``path``, one at a time; blank lines are skipped."""
    with _opened(path) as lines:
        number = 0
        while raw := lines.readline(MAX_LINE_BYTES + 1):
            number += 1
            where = f"{os.fspath(path)}:{number}"
            if len(raw) > MAX_LINE_BYTES:
                raise TraceFormatError(f"{where}: a line holds at most {MAX_LINE_BYTES} bytes")
            if raw.strip():
                yield _parse(_text(raw, where), where)


@contextmanager
def _opened(path: str | os.PathLike[str]) -> Generator[io.BufferedIOBase, None, None]:
    """The trace's bytes, decompressed when it is gzip; a damaged gzip stream is a :class:`TraceFormatError`."""
    with open(shipped_trace(path), "rb") as file:
        if file.read(2) != _GZIP_MAGIC:
            file.seek(0)
            yield file
            return
        file.seek(0)
        with gzip.GzipFile(fileobj=file, mode="rb") as unpacked:
            try:
                yield unpacked
            except (gzip.BadGzipFile, EOFError, zlib.error) as error:
                raise TraceFormatError(f"{os.fspath(path)}: not a readable gzip file ({error})") from None


def _text(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TraceFormatError(
            f"{where}: not UTF-8 text (byte {raw[error.start]:#04x} at column {error.start + 1})"
        ) from None


def _parse(line: str, where: str) -> TraceRequest:
    try:
        record: object = json.loads(line)
    except json.JSONDecodeError as error:
        raise TraceFormatError(f"{where}: not valid JSON ({error.msg} at column {error.colno})") from None
    except RecursionError:
        raise TraceFormatError(f"{where}: not a request: nested deeper than JSON can be read") from None
    except ValueError:  # the only other refusal: an integer of more digits than Python converts
        raise TraceFormatError(
            f"{where}: not a request: an integer has more than {sys.get_int_max_str_digits()} digits"
        ) from None
    if not _is_json_object(record):
        raise TraceFormatError(f"{where}: expected a JSON object with 'hash_ids', got {type(record).__name__}")
    hash_ids = _block_ids(record.get("hash_ids"))
    if hash_ids is None:
        raise TraceFormatError(
            f"{where}: 'hash_ids' must be a list of integers in [0, 2**64), at most {MAX_HASH_IDS} of them, "
            f"got {_shown(record.get('hash_ids'))}"
        )
    counts: list[int] = []
    for name in _COUNTS:
        value = record.get(name, 0)
        if type(value) is not int or not 0 <= value < _ID_LIMIT:
            raise TraceFormatError(f"{where}: {name!r} must be a non-negative integer below 2**64, got {_shown(value)}")
        counts.append(value)
    return TraceRequest(hash_ids, *counts)


def _block_ids(value: object) -> tuple[int, ...] | None:
    """``value`` as block ids if it is a list of at most ``MAX_HASH_IDS`` integers in [0, 2**64), else ``None``."""
    if not _is_json_array(value) or len(value) > MAX_HASH_IDS:
        return None
    ids: list[int] = []
    for item in value:
        if type(item) is not int or not 0 <= item < _ID_LIMIT:
            return None
        ids.append(item)
    return tuple(ids)


def _shown(value: object) -> str:
    """``value`` as an error shows it: a list by its size or its first bad item, an object by
    its kind, huge integers by their size, anything else cut at 80 characters."""
    if _is_json_array(value):
        if len(value) > MAX_HASH_IDS:
            return f"a list of {len(value)} items"
        bad = next(item for item in value if type(item) is not int or not 0 <= item < _ID_LIMIT)
        return f"a list holding {_shown(bad)}"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, int) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    return f"{value!r:.80}"


def _is_json_object(value: object) -> TypeGuard[dict[str, object]]:
    """Whether decoded JSON ``value`` is an object (JSON object keys are always strings)."""
    return isinstance(value, dict)


def _is_json_array(value: object) -> TypeGuard[list[object]]:
    """Whether decoded JSON ``value`` is an array."""
    return isinstance(value, list)
