"""The value of one block in a remote store (Redis, Mooncake): a checked header, the key, then the payload.

Layout (little-endian), format 2: magic ``KVCR``, format version (u16), key length (u16),
payload length (u64), xxh3-64 checksum of the payload (u64), the block identity's
fingerprint (16 bytes), the key, the payload: the file tier's block format, checked with
the same :mod:`kvcontract.tiers.integrity`. The key is repeated inside the value so that a
value copied or written under another key never passes for that key's block. Format 1
carried a fingerprint of the layout alone; its values live under other key names and are
refused by version if ever read. Header and payload may live apart (the Mooncake tier
sends the header from its own buffer and the payload straight from the host block), so
both halves are written and checked on their own as well as together.
"""

from __future__ import annotations

import struct

from kvcontract.contracts.keys import OffloadKey
from kvcontract.tiers.integrity import CorruptBlockError, checksum

__all__ = [
    "FORMAT_VERSION",
    "BadValueError",
    "check_value",
    "decode_value",
    "encode_header_into",
    "encode_value",
    "encode_value_into",
    "header_size",
]

MAGIC = b"KVCR"
FORMAT_VERSION = 2
_FIXED = struct.Struct("<4sHHQQ16s")


class BadValueError(CorruptBlockError):
    """A stored value that is not the block asked for.

    ``checksum_failed`` when only the payload hash is wrong, ``identity_mismatch`` when
    another block identity wrote it.
    """

    def __init__(self, message: str, *, checksum_failed: bool = False, identity_mismatch: bool = False) -> None:
        super().__init__(message)
        self.checksum_failed: bool = checksum_failed
        self.identity_mismatch: bool = identity_mismatch


def header_size(key: OffloadKey) -> int:
    """Bytes before the payload in the value of ``key``."""
    return _FIXED.size + len(key)


def encode_value(key: OffloadKey, fingerprint: bytes, payload: memoryview) -> bytes:
    """The value stored for ``key``: header, key and payload in one new buffer."""
    value = bytearray(header_size(key) + len(payload))
    encode_value_into(memoryview(value), key, fingerprint, payload)
    return bytes(value)


def encode_value_into(out: memoryview, key: OffloadKey, fingerprint: bytes, payload: memoryview) -> int:
    """Write the value of ``key`` at the start of ``out`` (one copy of the payload); its length.

    The tier builds values in a buffer it reuses, so large stores do not fault in fresh pages per value.
    """
    start = encode_header_into(out, key, fingerprint, payload)
    out[start : start + len(payload)] = payload
    return start + len(payload)


def encode_header_into(out: memoryview, key: OffloadKey, fingerprint: bytes, payload: memoryview) -> int:
    """Write the header of ``key``'s value over ``payload`` (its checksum read, never copied) at the start of ``out``; its length."""
    start = header_size(key)
    _FIXED.pack_into(out, 0, MAGIC, FORMAT_VERSION, len(key), len(payload), checksum(payload), fingerprint)
    out[_FIXED.size : start] = key
    return start


def decode_value(value: bytes, key: OffloadKey, fingerprint: bytes, payload_len: int) -> memoryview:
    """The payload of ``value`` once every header field and the checksum hold, else :class:`BadValueError`."""
    start = header_size(key)
    if len(value) < start:
        raise BadValueError(f"value of {len(value)} bytes is shorter than its header")
    view = memoryview(value)
    check_value(view[:start], view[start:], key, fingerprint, payload_len)
    return view[start:]


def check_value(header: memoryview, payload: memoryview, key: OffloadKey, fingerprint: bytes, payload_len: int) -> None:
    """Raise :class:`BadValueError` unless ``header`` and ``payload`` are the value of ``key``, of ``fingerprint``'s
    identity, with ``payload_len`` bytes whose checksum holds; ``header`` is ``header_size(key)`` bytes."""
    magic, version, key_len, stored_len, payload_checksum, stored_fingerprint = _FIXED.unpack_from(header)
    if magic != MAGIC:
        raise BadValueError(f"bad magic {magic!r}")
    if version != FORMAT_VERSION:
        raise BadValueError(f"format version {version}, expected {FORMAT_VERSION}")
    if stored_fingerprint != fingerprint:
        raise BadValueError(
            f"written under another block identity ({stored_fingerprint.hex()})", identity_mismatch=True
        )
    if key_len != len(key) or header[_FIXED.size :].tobytes() != key:
        raise BadValueError("holds another key")
    if stored_len != payload_len or len(payload) != payload_len:
        raise BadValueError(f"payload of {len(payload)} bytes (header says {stored_len}), expected {payload_len}")
    if checksum(payload) != payload_checksum:
        raise BadValueError("payload checksum mismatch", checksum_failed=True)
