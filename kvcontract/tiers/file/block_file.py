"""The on-disk format of one block (a checked header, the key, then the payload) and its safe I/O.

Layout (little-endian), format 2: magic ``KVCB``, format version (u16), key length (u16),
payload length (u64), xxh3-64 checksum of the payload (u64), the block identity's
fingerprint (16 bytes), the key, the payload. Every read verifies all of it, so a corrupt
or truncated file, or one another model wrote, never passes for data. Format 1 (no
fingerprint) is refused like any other corrupt file.

Files are reached as a name inside an open directory (:class:`BlockLocation`), never by a
path, and never through a symlink: whoever may write the tier's root could otherwise point
a block at a file elsewhere. Anything but a regular file where a block belongs (a symlink,
FIFO, device, socket or directory) is corrupt: it is removed, and it is opened without
blocking, so it never hangs a load or a scan.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import struct
import uuid
from dataclasses import dataclass

import xxhash

from kvcontract.contracts.keys import OffloadKey
from kvcontract.tiers.integrity import CorruptBlockError, IdentityMismatchError, checksum

__all__ = [
    "FORMAT_VERSION",
    "TEMP_SUFFIX",
    "BlockHeader",
    "BlockLocation",
    "CorruptBlockError",
    "IdentityMismatchError",
    "checksum",
    "delete_block",
    "read_block",
    "read_header",
    "remove_directory",
    "write_block",
]

MAGIC = b"KVCB"
FORMAT_VERSION = 2
TEMP_SUFFIX = ".tmp"
"""Ending of the temporary files a write renames into place: ``.PID.RANDOM.tmp``."""
_FIXED = struct.Struct("<4sHHQQ16s")
_MAX_KEY_BYTES = 0xFFFF
_READ_CHUNK = 256 << 10
"""Payload bytes per read call: hashing each chunk while cached reads 2 MiB blocks 20% faster."""
_FIRST_READ = 256
"""Bytes :func:`read_header` reads at once: the fixed header and any key up to 216 bytes."""
_NOFOLLOW = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_OPEN_FLAGS_READ = os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW
"""``O_NONBLOCK``: a FIFO swapped in after the type check opens at once instead of waiting for a writer."""
_OPEN_FLAGS_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW


@dataclass(frozen=True, slots=True)
class BlockLocation:
    """Where a block file belongs: ``name`` inside the open directory ``directory``, written with ``file_mode``."""

    directory: int
    name: str
    file_mode: int = 0o600


@dataclass(frozen=True, slots=True)
class BlockHeader:
    """What a block file's header says: the key, payload length, payload checksum and identity fingerprint."""

    key: OffloadKey
    payload_len: int
    checksum: int
    fingerprint: bytes

    @property
    def file_size(self) -> int:
        """Size of a complete file with this header."""
        return _FIXED.size + len(self.key) + self.payload_len


def _encode_header(key: OffloadKey, payload_len: int, payload_checksum: int, fingerprint: bytes) -> bytes:
    if len(key) > _MAX_KEY_BYTES:
        raise ValueError(f"key of {len(key)} bytes is too long for a block file: at most {_MAX_KEY_BYTES}")
    return _FIXED.pack(MAGIC, FORMAT_VERSION, len(key), payload_len, payload_checksum, fingerprint) + key


def _decode_fixed(head: bytes | bytearray, name: str) -> tuple[int, int, int, bytes]:
    """``(key_len, payload_len, checksum, fingerprint)`` of a header, or :class:`CorruptBlockError`."""
    if len(head) >= 6 and head[:4] == MAGIC and head[4:6] != FORMAT_VERSION.to_bytes(2, "little"):
        version = int.from_bytes(head[4:6], "little")
        raise CorruptBlockError(f"{name}: format version {version}, expected {FORMAT_VERSION}")
    if len(head) < _FIXED.size:
        raise CorruptBlockError(f"{name}: truncated header ({len(head)} bytes)")
    magic, _, key_len, payload_len, payload_checksum, fingerprint = _FIXED.unpack_from(head)
    if magic != MAGIC:
        raise CorruptBlockError(f"{name}: bad magic {magic!r}")
    return key_len, payload_len, payload_checksum, fingerprint


def write_block(location: BlockLocation, key: OffloadKey, payload: memoryview, *, fingerprint: bytes) -> None:
    """Write ``payload`` under ``key`` and the identity ``fingerprint`` to a temporary file, then rename
    it to ``location`` atomically.

    Readers see the old file or the whole new one, never a partial one; whatever held the
    name is replaced (a directory there is removed first). The data is not fsynced: after a
    crash a torn file fails its checksum and reads as a miss. On error the temporary file is
    removed and the ``OSError`` propagates.
    """
    header = _encode_header(key, len(payload), checksum(payload), fingerprint)
    directory = location.directory
    temp = f".{os.getpid()}.{uuid.uuid4().hex}{TEMP_SUFFIX}"
    fd = os.open(temp, _OPEN_FLAGS_WRITE, location.file_mode, dir_fd=directory)
    try:
        try:
            os.fchmod(fd, location.file_mode)  # the process umask may have narrowed the mode
            _write_all(fd, [header, payload])
        finally:
            os.close(fd)
        try:
            os.replace(temp, location.name, src_dir_fd=directory, dst_dir_fd=directory)
        except IsADirectoryError:
            remove_directory(directory, location.name)
            os.replace(temp, location.name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=directory)
        raise


def _write_all(fd: int, buffers: list[bytes | memoryview]) -> None:
    total = sum(len(b) for b in buffers)
    written = os.writev(fd, buffers)
    if written < total:
        rest = memoryview(b"".join(buffers))[written:]
        while rest:
            rest = rest[os.write(fd, rest) :]


def read_block(location: BlockLocation, key: OffloadKey, out: memoryview, *, fingerprint: bytes) -> None:
    """Read the block of ``key`` written under identity ``fingerprint`` at ``location`` into ``out`` and verify it.

    Raises ``FileNotFoundError`` (or another ``OSError``) when it cannot be read, and
    :class:`CorruptBlockError` when it is not a regular file or its header, length or
    checksum is wrong (:class:`IdentityMismatchError` when another identity wrote it); then
    ``out`` holds unverified bytes, and the entry is deleted unless another writer has
    replaced it meanwhile.
    """
    fd = _open_regular(location)
    try:
        try:
            _read_verified(location.name, fd, key, fingerprint, out)
        except CorruptBlockError:
            _unlink_if_unchanged(location, os.fstat(fd))
            raise
    finally:
        os.close(fd)


def _open_regular(location: BlockLocation) -> int:
    """Open the regular file at ``location`` for reading; anything else there is corrupt and removed."""
    found = os.stat(location.name, dir_fd=location.directory, follow_symlinks=False)
    if not stat.S_ISREG(found.st_mode):
        _remove_entry(location, found)
        raise CorruptBlockError(f"{location.name}: not a regular file (mode {found.st_mode:#o})")
    fd = os.open(location.name, _OPEN_FLAGS_READ, dir_fd=location.directory)
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode):
        os.close(fd)
        raise CorruptBlockError(f"{location.name}: replaced by something not a regular file")
    return fd


def _read_verified(name: str, fd: int, key: OffloadKey, fingerprint: bytes, out: memoryview) -> None:
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
            payload_checksum = _check_header(name, key, fingerprint, head, read, len(out))
            read -= len(head)
        if read != len(chunk):
            longer = read > len(chunk)
            raise CorruptBlockError(f"{name}: {'longer' if longer else 'shorter'} than its header says")
        hasher.update(chunk)
        done = end
        if last:
            break
    if hasher.intdigest() != payload_checksum:
        raise CorruptBlockError(f"{name}: payload checksum mismatch")


def _check_header(name: str, key: OffloadKey, fingerprint: bytes, head: bytearray, read: int, payload_len: int) -> int:
    """Check a header read for ``key``, identity ``fingerprint`` and a payload of ``payload_len`` bytes; its checksum."""
    if read < len(head):
        raise CorruptBlockError(f"{name}: truncated header ({read} bytes)")
    key_len, stored_len, payload_checksum, stored_fingerprint = _decode_fixed(head, name)
    if stored_fingerprint != fingerprint:
        raise IdentityMismatchError(f"{name}: written under another block identity ({stored_fingerprint.hex()})")
    if key_len != len(key) or bytes(head[_FIXED.size :]) != key:
        raise CorruptBlockError(f"{name}: holds another key")
    if stored_len != payload_len:
        raise CorruptBlockError(f"{name}: payload of {stored_len} bytes, expected {payload_len}")
    return payload_checksum


def read_header(location: BlockLocation) -> BlockHeader:
    """The header of the block file at ``location``, checked against the file's size.

    Cheap (no payload read, no checksum): used to rebuild the index. Raises ``OSError``
    or :class:`CorruptBlockError`; a corrupt entry is deleted unless replaced meanwhile.
    """
    fd = _open_regular(location)
    try:
        try:
            return _read_header(location.name, fd)
        except CorruptBlockError:
            _unlink_if_unchanged(location, os.fstat(fd))
            raise
    finally:
        os.close(fd)


def _read_header(name: str, fd: int) -> BlockHeader:
    head = os.pread(fd, _FIRST_READ, 0)
    key_len, payload_len, payload_checksum, fingerprint = _decode_fixed(head, name)
    if len(head) < _FIXED.size + key_len:
        head += os.pread(fd, _FIXED.size + key_len - len(head), len(head))
    key = head[_FIXED.size : _FIXED.size + key_len]
    if len(key) != key_len:
        raise CorruptBlockError(f"{name}: truncated key")
    header = BlockHeader(OffloadKey(key), payload_len, payload_checksum, fingerprint)
    if os.fstat(fd).st_size != header.file_size:
        raise CorruptBlockError(f"{name}: size does not match its header")
    return header


def delete_block(location: BlockLocation) -> None:
    """Delete whatever is at ``location``; an entry already gone, or that cannot be deleted, is left to the next scan."""
    with contextlib.suppress(OSError):
        _remove_entry(location, os.stat(location.name, dir_fd=location.directory, follow_symlinks=False))


def _unlink_if_unchanged(location: BlockLocation, opened: os.stat_result) -> None:
    """Delete the entry at ``location`` if it is still the file ``opened`` (not replaced by a writer)."""
    with contextlib.suppress(OSError):
        current = os.stat(location.name, dir_fd=location.directory, follow_symlinks=False)
        if (opened.st_dev, opened.st_ino) == (current.st_dev, current.st_ino):
            os.unlink(location.name, dir_fd=location.directory)


def _remove_entry(location: BlockLocation, found: os.stat_result) -> None:
    """Remove ``found``, the entry at ``location``: unlinked (a symlink itself, never its target) or a tree removed."""
    if stat.S_ISDIR(found.st_mode):
        with contextlib.suppress(OSError):
            remove_directory(location.directory, location.name)
    else:
        _unlink_if_unchanged(location, found)


def remove_directory(directory: int, name: str) -> None:
    """Remove the directory ``name`` in ``directory`` and all it holds, following no symlink."""
    shutil.rmtree(name, dir_fd=directory)
