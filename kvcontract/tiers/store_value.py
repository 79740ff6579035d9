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

Format 3 is a value sealed with an integrity key (:class:`~kvcontract.tiers.integrity.ValueMac`):
magic, version (3), key length, payload length, fingerprint, then a 16-byte MAC over all of
those, the key and the payload, in place of the checksum (the MAC covers the payload, and a
second pass over it would cost for nothing). A tier with a key reads format 3 only, a tier
without one format 2 only: a value of the other kind, or sealed with another key, is a bad value.
"""

from __future__ import annotations

import struct

from kvcontract.contracts.keys import OffloadKey
from kvcontract.tiers.integrity import MAC_BYTES, CorruptBlockError, ValueMac, checksum

__all__ = [
    "FORMAT_VERSION",
    "SEALED_FORMAT_VERSION",
    "BadValueError",
    "check_value",
    "decode_value",
    "encode_header_into",
    "encode_value",
    "encode_value_into",
    "header_size",
    "max_header_size",
    "sealing_differs",
]

MAGIC = b"KVCR"
FORMAT_VERSION = 2
SEALED_FORMAT_VERSION = 3
"""The format of values sealed with an integrity key."""
_FIXED = struct.Struct("<4sHHQQ16s")
_SEALED = struct.Struct(f"<4sHHQ16s{MAC_BYTES}s")
_SEALED_COVERED = _SEALED.size - MAC_BYTES
"""Bytes of a sealed header's fixed part that its MAC covers: all but the MAC itself."""


class BadValueError(CorruptBlockError):
    """A stored value that is not the block asked for.

    ``checksum_failed`` when only the payload hash is wrong, ``identity_mismatch`` when
    another block identity wrote it, ``forged`` when its MAC does not hold or it carries none
    (or one) where the reader expects the other.
    """

    def __init__(
        self, message: str, *, checksum_failed: bool = False, identity_mismatch: bool = False, forged: bool = False
    ) -> None:
        super().__init__(message)
        self.checksum_failed: bool = checksum_failed
        self.identity_mismatch: bool = identity_mismatch
        self.forged: bool = forged


def header_size(key: OffloadKey, mac: ValueMac | None = None) -> int:
    """Bytes before the payload in the value of ``key`` (sealed with ``mac`` if given)."""
    return (_FIXED.size if mac is None else _SEALED.size) + len(key)


def max_header_size(mac: ValueMac | None = None) -> int:
    """Bytes before the payload in the value of the longest key a value can carry."""
    return header_size(OffloadKey(bytes(0xFFFF)), mac)


def encode_value(key: OffloadKey, fingerprint: bytes, payload: memoryview, mac: ValueMac | None = None) -> bytes:
    """The value stored for ``key``: header, key and payload in one new buffer."""
    value = bytearray(header_size(key, mac) + len(payload))
    encode_value_into(memoryview(value), key, fingerprint, payload, mac)
    return bytes(value)


def encode_value_into(
    out: memoryview, key: OffloadKey, fingerprint: bytes, payload: memoryview, mac: ValueMac | None = None
) -> int:
    """Write the value of ``key`` at the start of ``out`` (one copy of the payload); its length.

    The tier builds values in a buffer it reuses, so large stores do not fault in fresh pages per value.
    """
    start = encode_header_into(out, key, fingerprint, payload, mac)
    out[start : start + len(payload)] = payload
    return start + len(payload)


def encode_header_into(
    out: memoryview, key: OffloadKey, fingerprint: bytes, payload: memoryview, mac: ValueMac | None = None
) -> int:
    """Write the header of ``key``'s value over ``payload`` (its checksum or MAC read, never copied) at the start of ``out``; its length."""
    start = header_size(key, mac)
    if mac is None:
        _FIXED.pack_into(out, 0, MAGIC, FORMAT_VERSION, len(key), len(payload), checksum(payload), fingerprint)
        out[_FIXED.size : start] = key
        return start
    _SEALED.pack_into(out, 0, MAGIC, SEALED_FORMAT_VERSION, len(key), len(payload), fingerprint, bytes(MAC_BYTES))
    out[_SEALED.size : start] = key
    out[_SEALED_COVERED : _SEALED.size] = mac.tag(out[:_SEALED_COVERED], key, payload)
    return start


def decode_value(
    value: bytes, key: OffloadKey, fingerprint: bytes, payload_len: int, mac: ValueMac | None = None
) -> memoryview:
    """The payload of ``value`` once every header field and the checksum (or MAC) hold, else :class:`BadValueError`."""
    start = header_size(key, mac)
    if len(value) < start:
        raise BadValueError(f"value of {len(value)} bytes is shorter than its header")
    view = memoryview(value)
    check_value(view[:start], view[start:], key, fingerprint, payload_len, mac)
    return view[start:]


def sealing_differs(header: memoryview, mac: ValueMac | None) -> bool:
    """Whether ``header`` (the first bytes of a value) says it is sealed where the reader holds no key, or the reverse.

    A store that answers with a value's size before its bytes (Mooncake) meets a value of the
    other kind as one of the wrong length: this tells such a value from a short or long one.
    """
    if len(header) < 6 or bytes(header[:4]) != MAGIC:
        return False
    version = int.from_bytes(header[4:6], "little")
    return version in (FORMAT_VERSION, SEALED_FORMAT_VERSION) and (version == SEALED_FORMAT_VERSION) != (
        mac is not None
    )


def check_value(
    header: memoryview,
    payload: memoryview,
    key: OffloadKey,
    fingerprint: bytes,
    payload_len: int,
    mac: ValueMac | None = None,
) -> None:
    """Raise :class:`BadValueError` unless ``header`` and ``payload`` are the value of ``key``, of ``fingerprint``'s
    identity, with ``payload_len`` bytes whose checksum (or, given ``mac``, MAC) holds; ``header`` is ``header_size(key, mac)`` bytes."""
    magic, version = struct.unpack_from("<4sH", header)
    if magic != MAGIC:
        raise BadValueError(f"bad magic {magic!r}")
    if mac is not None:
        _check_sealed(header, payload, key, fingerprint, payload_len, mac, version)
        return
    if version == SEALED_FORMAT_VERSION:
        raise BadValueError(
            "sealed with an integrity key this tier does not hold: give it the same integrity_key_file", forged=True
        )
    if version != FORMAT_VERSION:
        raise BadValueError(f"format version {version}, expected {FORMAT_VERSION}")
    _, _, key_len, stored_len, payload_checksum, stored_fingerprint = _FIXED.unpack_from(header)
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


def _check_sealed(
    header: memoryview,
    payload: memoryview,
    key: OffloadKey,
    fingerprint: bytes,
    payload_len: int,
    mac: ValueMac,
    version: int,
) -> None:
    """The checks of :func:`check_value` for a tier that holds an integrity key: the MAC first, then the fields it covers."""
    if version != SEALED_FORMAT_VERSION:
        raise BadValueError(f"not sealed with the integrity key (format version {version})", forged=True)
    if len(header) < _SEALED.size:
        raise BadValueError(f"header of {len(header)} bytes is shorter than a sealed one")
    _, _, key_len, stored_len, stored_fingerprint, tag = _SEALED.unpack_from(header)
    if len(header) != _SEALED.size + key_len:
        raise BadValueError("holds another key")
    hasher = mac.start()
    hasher.update(header[:_SEALED_COVERED])
    hasher.update(header[_SEALED.size :])
    hasher.update(payload)
    if not mac.matches(hasher, tag):
        raise BadValueError("MAC mismatch: written without this integrity key, with another, or altered", forged=True)
    if stored_fingerprint != fingerprint:
        raise BadValueError(
            f"written under another block identity ({stored_fingerprint.hex()})", identity_mismatch=True
        )
    if header[_SEALED.size :].tobytes() != key:
        raise BadValueError("holds another key")
    if stored_len != payload_len or len(payload) != payload_len:
        raise BadValueError(f"payload of {len(payload)} bytes (header says {stored_len}), expected {payload_len}")
