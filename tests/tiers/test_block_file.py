"""The block file format: round trip, atomic writes, and every kind of damage detected on read."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import xxhash

from kvcontract import make_offload_key
from kvcontract.tiers.file import block_file
from kvcontract.tiers.file.block_file import (
    BlockLocation,
    CorruptBlockError,
    IdentityMismatchError,
    read_block,
    read_header,
    write_block,
)
from tests.tiers.support import FINGERPRINT

KEY = make_offload_key(b"k" * 16, 3)
PAYLOAD = bytes(range(256)) * 4


@pytest.fixture
def at(tmp_path: Path) -> Iterator[BlockLocation]:
    """Where the test's block file belongs: ``block.kvb`` in ``tmp_path``, opened as a directory."""
    directory = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield BlockLocation(directory, "block.kvb")
    os.close(directory)


@pytest.fixture
def path(tmp_path: Path) -> str:
    """The path of the test's block file."""
    return str(tmp_path / "block.kvb")


def write(at: BlockLocation, payload: bytes = PAYLOAD) -> None:
    """Write ``payload`` as the block of ``KEY`` at ``at``."""
    write_block(at, KEY, memoryview(payload), fingerprint=FINGERPRINT)


def test_round_trip_and_no_temporary_file_left(tmp_path: Path, at: BlockLocation) -> None:
    write(at)
    out = bytearray(len(PAYLOAD))
    read_block(at, KEY, memoryview(out), fingerprint=FINGERPRINT)
    assert out == PAYLOAD
    assert os.listdir(tmp_path) == ["block.kvb"]


def test_header_reports_key_length_and_checksum(path: str, at: BlockLocation) -> None:
    write(at)
    header = read_header(at)
    assert header.key == KEY
    assert header.payload_len == len(PAYLOAD)
    assert header.checksum == block_file.checksum(memoryview(PAYLOAD))
    assert header.fingerprint == FINGERPRINT
    assert header.file_size == os.path.getsize(path)


def test_a_file_of_another_identity_is_refused_and_deleted(path: str, at: BlockLocation) -> None:
    write_block(at, KEY, memoryview(PAYLOAD), fingerprint=bytes(16))
    with pytest.raises(IdentityMismatchError, match="another block identity"):
        read_block(at, KEY, memoryview(bytearray(len(PAYLOAD))), fingerprint=FINGERPRINT)
    assert not os.path.exists(path)


def test_a_file_of_format_1_is_refused_by_its_version(path: str, at: BlockLocation) -> None:
    """Format 1 had no fingerprint: its header is 16 bytes shorter, and its version names it."""
    checksum = block_file.checksum(memoryview(PAYLOAD))
    Path(path).write_bytes(struct.pack("<4sHHQQ", b"KVCB", 1, len(KEY), len(PAYLOAD), checksum) + KEY + PAYLOAD)
    with pytest.raises(CorruptBlockError, match="format version 1, expected 2"):
        read_block(at, KEY, memoryview(bytearray(len(PAYLOAD))), fingerprint=FINGERPRINT)
    assert not os.path.exists(path)


def test_rewrite_replaces_the_whole_file(at: BlockLocation) -> None:
    write(at)
    write(at, PAYLOAD[::-1])
    out = bytearray(len(PAYLOAD))
    read_block(at, KEY, memoryview(out), fingerprint=FINGERPRINT)
    assert out == PAYLOAD[::-1]


def flip(path: str, offset: int) -> None:
    """Invert the byte at ``offset`` of the file at ``path``."""
    with open(path, "r+b") as file:
        file.seek(offset)
        byte = file.read(1)
        file.seek(offset)
        file.write(bytes([byte[0] ^ 0xFF]))


HEADER = struct.calcsize("<4sHHQQ16s") + len(KEY)


DAMAGES: dict[str, tuple[Callable[[str], object], str]] = {
    "payload": (lambda p: flip(p, HEADER + 100), "checksum"),
    "magic": (lambda p: flip(p, 0), "magic"),
    "version": (lambda p: flip(p, 4), "format version"),
    "key": (lambda p: flip(p, HEADER - 1), "another key"),
    "length": (lambda p: flip(p, 8), "payload of"),
    "truncated": (lambda p: os.truncate(p, HEADER + 10), "shorter"),
    "short-header": (lambda p: os.truncate(p, 10), "truncated header"),
    "empty": (lambda p: os.truncate(p, 0), "truncated header"),
    "extended": (lambda p: Path(p).write_bytes(Path(p).read_bytes() + b"x"), "longer"),
}
"""Ways to damage a block file, and what the error then says."""


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damage_is_detected_and_the_file_deleted(path: str, at: BlockLocation, damage: str) -> None:
    damage_file, message = DAMAGES[damage]
    write(at)
    damage_file(path)
    with pytest.raises(CorruptBlockError, match=message):
        read_block(at, KEY, memoryview(bytearray(len(PAYLOAD))), fingerprint=FINGERPRINT)
    assert not os.path.exists(path)


def test_reading_with_another_block_size_is_corrupt(at: BlockLocation) -> None:
    write(at)
    with pytest.raises(CorruptBlockError, match="payload of 1024 bytes, expected 512"):
        read_block(at, KEY, memoryview(bytearray(512)), fingerprint=FINGERPRINT)


def test_missing_file_is_file_not_found(at: BlockLocation) -> None:
    with pytest.raises(FileNotFoundError):
        read_block(at, KEY, memoryview(bytearray(4)), fingerprint=FINGERPRINT)


def test_truncated_header_scan_deletes_the_file(path: str, at: BlockLocation) -> None:
    write(at)
    os.truncate(path, HEADER + 1)
    with pytest.raises(CorruptBlockError, match="size does not match"):
        read_header(at)
    assert not os.path.exists(path)


def test_a_replaced_corrupt_file_is_not_deleted(path: str, at: BlockLocation, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that renames a new file into place while a reader finds the old one corrupt keeps it."""
    write(at)
    flip(path, HEADER + 1)
    real_hasher = xxhash.xxh3_64

    def hasher_after_rewrite() -> xxhash.xxh3_64:
        monkeypatch.setattr(xxhash, "xxh3_64", real_hasher)
        write(at)
        return real_hasher()

    monkeypatch.setattr(xxhash, "xxh3_64", hasher_after_rewrite)
    with pytest.raises(CorruptBlockError, match="checksum"):
        read_block(at, KEY, memoryview(bytearray(len(PAYLOAD))), fingerprint=FINGERPRINT)
    out = bytearray(len(PAYLOAD))
    read_block(at, KEY, memoryview(out), fingerprint=FINGERPRINT)
    assert out == PAYLOAD


def test_blocks_larger_than_one_read_chunk(path: str, at: BlockLocation) -> None:
    payload = bytes(range(251)) * 4000
    write(at, payload)
    out = bytearray(len(payload))
    read_block(at, KEY, memoryview(out), fingerprint=FINGERPRINT)
    assert out == payload
    damages: list[tuple[Callable[[str], object], str]] = [
        (lambda p: flip(p, HEADER + 700_000), "checksum"),
        (lambda p: os.truncate(p, HEADER + 600_000), "shorter"),
        (lambda p: Path(p).write_bytes(Path(p).read_bytes() + b"x"), "longer"),
    ]
    for damage_file, message in damages:
        write(at, payload)
        damage_file(path)
        with pytest.raises(CorruptBlockError, match=message):
            read_block(at, KEY, memoryview(out), fingerprint=FINGERPRINT)


def test_failed_write_removes_its_temporary_file(
    tmp_path: Path, at: BlockLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_rename(src: str, dst: str, **dir_fds: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(OSError, match="No space"):
        write(at)
    assert os.listdir(tmp_path) == []


def test_files_are_created_with_the_location_mode(path: str, tmp_path: Path) -> None:
    """The process umask cannot narrow (nor the default widen) the mode a tier asks for."""
    directory = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        write(BlockLocation(directory, "block.kvb"))
        assert os.stat(path).st_mode & 0o777 == 0o600
        old_umask = os.umask(0o077)
        try:
            write(BlockLocation(directory, "block.kvb", file_mode=0o660))
        finally:
            os.umask(old_umask)
        assert os.stat(path).st_mode & 0o777 == 0o660
    finally:
        os.close(directory)
