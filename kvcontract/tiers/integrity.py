"""What every tier checks on a value it reads back: the payload checksum, the block identity and, with a key, a MAC.

One home for all three, so the file, Redis and Mooncake formats verify alike: a value that
fails any is a miss and an event, never bytes in a host block.

The checksum (xxh3) catches accidents; it has no secret, so whoever can write the store can
forge it. Engines that share an integrity key also seal every value with a keyed MAC
(:class:`ValueMac`): BLAKE3 in keyed mode, 128-bit tags. Measured on one core of the 2-core
AMD EPYC this project builds on, over 64 KiB to 2 MiB buffers: BLAKE3 keyed 6.0-6.5 GB/s,
HMAC-SHA256 1.7-1.8 GB/s, keyed BLAKE2b 0.9 GB/s (xxh3: 63 GB/s, cache-hot), so BLAKE3
costs a third of HMAC per block (``tools/bench_mac.py``; docs/performance.md).
"""

from __future__ import annotations

import hmac
import logging
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import xxhash
from typing_extensions import override

from kvcontract.extras import MissingExtraError

__all__ = [
    "KEY_MIN_BYTES",
    "MAC_BYTES",
    "CorruptBlockError",
    "ForgedValueError",
    "IdentityMismatchError",
    "IntegrityKeyError",
    "MismatchLog",
    "SecretFileError",
    "ValueMac",
    "checksum",
    "read_integrity_key",
    "read_secret_file",
    "value_mac",
]

KEY_MIN_BYTES = 32
"""The shortest integrity key accepted: 256 bits, as BLAKE3's keyed mode takes."""
_KEY_MAX_BYTES = 4096
"""The longest key file read: a key is a few dozen bytes; a larger file is a mistake, refused before it is read."""
MAC_BYTES = 16
"""Bytes of the MAC stored in each value: a 128-bit tag."""
_KEY_CONTEXT = "kvcontract 2026-12 tier value MAC v1"
"""BLAKE3's key-derivation context: the MAC key is derived from the key given, so any 32+ bytes serve."""
MISSING_EXTRA = "an integrity key needs the blake3 package: pip install 'kvcontract[integrity]'"
"""The one error a missing blake3 gives."""


class CorruptBlockError(Exception):
    """A stored block whose type, header, length or checksum does not hold up."""


class IdentityMismatchError(CorruptBlockError):
    """A stored block written under another block identity (another model, layout, rank or namespace)."""


class ForgedValueError(CorruptBlockError):
    """A stored block whose MAC does not hold: written without this tier's integrity key, with another, or altered."""


class SecretFileError(ValueError):
    """A file of a secret (an integrity key, a password) that is not private or cannot be read; the message says how to fix it."""


class IntegrityKeyError(SecretFileError):
    """An integrity key, or its file, that cannot be used; the message says what is wrong and how to fix it."""


class _Hasher(Protocol):
    def update(self, data: bytes | bytearray | memoryview, /) -> object: ...

    def digest(self, length: int = ..., /) -> bytes: ...


class ValueMac:
    """The keyed MAC of a tier's values (BLAKE3 keyed mode, 128-bit tags), for the engines that hold the key.

    The MAC key is derived from ``key`` (at least :data:`KEY_MIN_BYTES` bytes) with BLAKE3's
    key derivation, so a key file of any 32 or more random bytes serves. The key is never shown.
    """

    def __init__(self, key: bytes) -> None:
        if len(key) < KEY_MIN_BYTES:
            raise IntegrityKeyError(
                f"integrity key of {len(key)} bytes is too short: give at least {KEY_MIN_BYTES} random bytes "
                "(head -c 32 /dev/urandom > key)"
            )
        try:
            from blake3 import blake3
        except ImportError:
            raise MissingExtraError(MISSING_EXTRA, extra="integrity") from None
        derived: bytes = blake3(key, derive_key_context=_KEY_CONTEXT).digest()
        self._new: Callable[[], _Hasher] = lambda: blake3(key=derived)

    @override
    def __repr__(self) -> str:
        return "ValueMac(<key hidden>)"

    def start(self) -> _Hasher:
        """A MAC over parts still to come (``update`` each, then :meth:`matches` or ``digest(MAC_BYTES)``)."""
        return self._new()

    def tag(self, *parts: bytes | bytearray | memoryview) -> bytes:
        """The MAC of ``parts`` in order."""
        hasher = self._new()
        for part in parts:
            hasher.update(part)
        return hasher.digest(MAC_BYTES)

    @staticmethod
    def matches(hasher: _Hasher, tag: bytes | bytearray | memoryview) -> bool:
        """Whether ``hasher``'s MAC is ``tag``, compared in constant time."""
        return hmac.compare_digest(hasher.digest(MAC_BYTES), bytes(tag))


def value_mac(key: bytes | None) -> ValueMac | None:
    """The MAC for ``key``, or ``None`` when no key is given (values then carry the checksum alone)."""
    return None if key is None else ValueMac(key)


def read_integrity_key(path: Path) -> bytes:
    """The integrity key held in ``path``, once the file proves private (:func:`read_secret_file`) and long enough.

    Whoever can read the key can forge blocks that load, and whoever can write it can make an
    engine refuse every block; so, as the file tier's root, the file must belong to this
    process's user, and group and others may neither read nor write it (``chmod 600``).
    """
    key = read_secret_file(path, "integrity key file")
    if len(key) < KEY_MIN_BYTES:
        raise IntegrityKeyError(
            f"integrity key file {path} holds {len(key)} bytes: give at least {KEY_MIN_BYTES} random bytes "
            f"(head -c 32 /dev/urandom > {path})"
        )
    return key


def read_secret_file(path: Path, what: str) -> bytes:
    """The bytes of ``path`` (a key or a password: ``what`` names it in errors), once it is a regular file of this
    process's user that group and others can neither read nor write, and at most 4 KiB; else :class:`SecretFileError`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise SecretFileError(
            f"{what} {path}: cannot open it ({error.strerror}); it must be a regular file, not a symlink"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SecretFileError(f"{what} {path} is not a regular file")
        if info.st_uid != os.geteuid():
            raise SecretFileError(
                f"{what} {path} belongs to uid {info.st_uid}, not to this process's uid {os.geteuid()}: "
                "its owner could change it. Copy it to a file of this user (chmod 600)"
            )
        if info.st_mode & 0o077:
            raise SecretFileError(
                f"{what} {path} has mode {info.st_mode & 0o7777:#o}: group or others may read or write it. "
                f"Run chmod 600 {path}"
            )
        if info.st_size > _KEY_MAX_BYTES:
            raise SecretFileError(f"{what} {path} holds {info.st_size} bytes: at most {_KEY_MAX_BYTES}")
        return os.read(fd, _KEY_MAX_BYTES + 1)
    finally:
        os.close(fd)


def checksum(payload: memoryview) -> int:
    """The payload checksum: xxh3-64, chosen for speed (about 12 GB/s, against 1.8 for crc32)."""
    return xxhash.xxh3_64_intdigest(payload)


class MismatchLog:
    """Counts a tier's values of another identity and logs the first one, so operators see it once."""

    def __init__(self, logger: logging.Logger, tier: str, fingerprint_hex: str) -> None:
        self._logger = logger
        self._tier = tier
        self._fingerprint = fingerprint_hex
        self._lock = threading.Lock()
        self.count: int = 0

    def record(self, where: str) -> None:
        """One value of another identity met at ``where`` (a key or a file)."""
        with self._lock:
            self.count += 1
            first = self.count == 1
        if first:
            self._logger.warning(
                "%s: %s was written under another block identity than this engine's (%s): read as a miss. "
                "Engines of other models, layouts or ranks share this storage; further mismatches are "
                "counted in kvcontract_identity_mismatches_total",
                self._tier,
                where,
                self._fingerprint,
            )
