"""The on-disk format of one block: a checked header, the key, then the payload.

Layout (little-endian): magic ``KVCB``, format version (u16), key length (u16), payload
length (u64), xxh3-64 checksum of the payload (u64), the key, the payload. Every read
verifies all of it, so a corrupt or truncated file never passes for data.
"""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass

import xxhash

from kvcontract.contracts.keys import OffloadKey

__all__ = [
    "FORMAT_VERSION",
    "BlockHeader",
    "CorruptBlockError",
    "checksum",
    "delete_block",
    "read_block",
    "read_header",
    "write_block",
]

MAGIC = b"KVCB"
FORMAT_VERSION = 1
_FIXED = struct.Struct("<4sHHQQ")
_MAX_KEY_BYTES = 0xFFFF
_READ_CHUNK = 256 << 10
"""Payload bytes per read call: hashing each chunk while cached reads 2 MiB blocks 20% faster."""
_FIRST_READ = 256
"""Bytes :func:`read_header` reads at once: the fixed header and any key up to 232 bytes."""
_OPEN_FLAGS_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_OPEN_FLAGS_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


class CorruptBlockError(Exception):
    """A block file whose header, length or checksum does not hold up."""


@dataclass(frozen=True, slots=True)
class BlockHeader:
    """What a block file's header says: the key, payload length and payload checksum."""

    key: OffloadKey
    payload_len: int
    checksum: int

    @property
    def file_size(self) -> int:
        """Size of a complete file with this header."""
        return _FIXED.size + len(self.key) + self.payload_len


def checksum(payload: memoryview) -> int:
    """The payload checksum: xxh3-64, chosen for speed (about 12 GB/s, against 1.8 for crc32)."""
    return xxhash.xxh3_64_intdigest(payload)


def _encode_header(key: OffloadKey, payload_len: int, payload_checksum: int) -> bytes:
    if len(key) > _MAX_KEY_BYTES:
        raise ValueError(
            f"key of {len(key)} bytes is too long for a block file: at most {_MAX_KEY_BYTES}"
        )
    return _FIXED.pack(MAGIC, FORMAT_VERSION, len(key), payload_len, payload_checksum) + key


def _decode_fixed(head: bytes | bytearray, path: str) -> tuple[int, int, int]:
    """``(key_len, payload_len, checksum)`` of a header, or :class:`CorruptBlockError`."""
    if len(head) < _FIXED.size:
        raise CorruptBlockError(f"{path}: truncated header ({len(head)} bytes)")
    magic, version, key_len, payload_len, payload_checksum = _FIXED.unpack_from(head)
    if magic != MAGIC:
        raise CorruptBlockError(f"{path}: bad magic {magic!r}")
    if version != FORMAT_VERSION:
        raise CorruptBlockError(f"{path}: format version {version}, expected {FORMAT_VERSION}")
    return key_len, payload_len, payload_checksum


def write_block(path: str, temp_path: str, key: OffloadKey, payload: memoryview) -> None:
    """Write ``payload`` under ``key`` to ``temp_path``, then rename it to ``path`` atomically.

    Readers see the old file or the whole new one, never a partial one. The data is not
    fsynced: after a crash a torn file fails its checksum and reads as a miss. On error
    the temporary file is removed and the ``OSError`` propagates.
    """
    header = _encode_header(key, len(payload), checksum(payload))
    fd = os.open(temp_path, _OPEN_FLAGS_WRITE, 0o644)
    try:
        try:
            _write_all(fd, [header, payload])
        finally:
            os.close(fd)
        os.replace(temp_path, path)
    except BaseException:
        delete_block(temp_path)
        raise


def _write_all(fd: int, buffers: list[bytes | memoryview]) -> None:
    total = sum(len(b) for b in buffers)
    written = os.writev(fd, buffers)
    if written < total:
        rest = memoryview(b"".join(buffers))[written:]
        while rest:
            rest = rest[os.write(fd, rest) :]


def read_block(path: str, key: OffloadKey, out: memoryview) -> None:
    """Read the block of ``key`` at ``path`` into ``out`` and verify it.

    Raises ``FileNotFoundError`` (or another ``OSError``) when it cannot be read, and
    :class:`CorruptBlockError` when the header, the length or the checksum is wrong; then
    ``out`` holds unverified bytes, and a corrupt file is deleted unless another writer
    has replaced it meanwhile.
    """
    fd = os.open(path, _OPEN_FLAGS_READ)
    try:
        try:
            _read_verified(path, fd, key, out)
        except CorruptBlockError:
            _unlink_if_unchanged(path, fd)
            raise
    finally:
        os.close(fd)


def _read_verified(path: str, fd: int, key: OffloadKey, out: memoryview) -> None:
    """Read ``out`` chunk by chunk, hashing each chunk while it is still in the CPU cache.

    The first read takes the header too, the last one byte more to catch a longer file.
    """
    head = bytearray(_FIXED.size + len(key))
    extra = bytearray(1)
    hasher = xxhash.xxh3_64()
    payload_checksum = 0
    done = 0
    position = 0
    while True:
        end = min(done + _READ_CHUNK, len(out))
        chunk = out[done:end]
        last = end == len(out)
        buffers: list[bytearray | memoryview] = [head, chunk] if done == 0 else [chunk]
        if last:
            buffers.append(extra)
        read = os.preadv(fd, buffers, position)
        position += read
        if done == 0:
            payload_checksum = _check_header(path, key, head, read, len(out))
            read -= len(head)
        if read != len(chunk):
            longer = read > len(chunk)
            raise CorruptBlockError(f"{path}: {'longer' if longer else 'shorter'} than its header says")
        hasher.update(chunk)
        done = end
        if last:
            break
    if hasher.intdigest() != payload_checksum:
        raise CorruptBlockError(f"{path}: payload checksum mismatch")


def _check_header(path: str, key: OffloadKey, head: bytearray, read: int, payload_len: int) -> int:
    """Check a header read for ``key`` and a payload of ``payload_len`` bytes; its checksum."""
    if read < len(head):
        raise CorruptBlockError(f"{path}: truncated header ({read} bytes)")
    key_len, stored_len, payload_checksum = _decode_fixed(head, path)
    if key_len != len(key) or bytes(head[_FIXED.size :]) != key:
        raise CorruptBlockError(f"{path}: holds another key")
    if stored_len != payload_len:
        raise CorruptBlockError(f"{path}: payload of {stored_len} bytes, expected {payload_len}")
    return payload_checksum


def read_header(path: str) -> BlockHeader:
    """The header of the block file at ``path``, checked against the file's size.

    Cheap (no payload read, no checksum): used to rebuild the index. Raises ``OSError``
    or :class:`CorruptBlockError`; a corrupt file is deleted unless replaced meanwhile.
    """
    fd = os.open(path, _OPEN_FLAGS_READ)
    try:
        try:
            return _read_header(path, fd)
        except CorruptBlockError:
            _unlink_if_unchanged(path, fd)
            raise
    finally:
        os.close(fd)


def _read_header(path: str, fd: int) -> BlockHeader:
    head = os.pread(fd, _FIRST_READ, 0)
    key_len, payload_len, payload_checksum = _decode_fixed(head, path)
    if len(head) < _FIXED.size + key_len:
        head += os.pread(fd, _FIXED.size + key_len - len(head), len(head))
    key = head[_FIXED.size : _FIXED.size + key_len]
    if len(key) != key_len:
        raise CorruptBlockError(f"{path}: truncated key")
    header = BlockHeader(OffloadKey(key), payload_len, payload_checksum)
    if os.fstat(fd).st_size != header.file_size:
        raise CorruptBlockError(f"{path}: size does not match its header")
    return header


def delete_block(path: str) -> None:
    """Delete a block file; one already gone, or that cannot be deleted, is left to the next scan."""
    with contextlib.suppress(OSError):
        os.unlink(path)


def _unlink_if_unchanged(path: str, fd: int) -> None:
    """Delete ``path`` if it is still the file open as ``fd`` (not replaced by a writer)."""
    try:
        opened = os.fstat(fd)
        current = os.stat(path)
        if (opened.st_dev, opened.st_ino) == (current.st_dev, current.st_ino):
            os.unlink(path)
    except OSError:
        pass
