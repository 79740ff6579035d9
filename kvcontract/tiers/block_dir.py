"""Where a file tier's blocks live under its root: sharded paths, temporary names, the start-up scan.

A key's file is ``root/ab/cd/abcd....kvb``, named by a 128-bit BLAKE2b hash of the key
(the key itself is in the header); temporary files are ``.PID.RANDOM.tmp`` beside it.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kvcontract.contracts.keys import OffloadKey
from kvcontract.tiers.block_file import CorruptBlockError, read_header

__all__ = ["STALE_TEMP_SECONDS", "BlockDirectory", "FoundBlock"]

STALE_TEMP_SECONDS = 3600.0
"""A temporary file this old is abandoned even if its writer's pid is alive (pid reuse, other hosts)."""
_BLOCK_SUFFIX = ".kvb"
_TEMP_SUFFIX = ".tmp"


@dataclass(frozen=True, slots=True)
class FoundBlock:
    """A well-formed block file found by the scan (its checksum is checked on read)."""

    key: OffloadKey
    payload_len: int
    mtime: float


class BlockDirectory:
    """Maps keys to sharded file paths under ``root`` and finds the blocks already there."""

    def __init__(self, root: Path) -> None:
        if root.exists() and not root.is_dir():
            raise NotADirectoryError(f"file tier root {root} exists and is not a directory")
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self._root = str(root)

    def path_of(self, key: OffloadKey) -> str:
        """The file of ``key``: two levels of two hex digits of its hash, then the hash."""
        name = hashlib.blake2b(key, digest_size=16).hexdigest()
        return os.path.join(self._root, name[:2], name[2:4], name + _BLOCK_SUFFIX)

    @staticmethod
    def new_temp_path(path: str) -> str:
        """A fresh temporary name beside ``path`` (same filesystem: atomic renames); makes the directory."""
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        return os.path.join(directory, f".{os.getpid()}.{uuid.uuid4().hex}{_TEMP_SUFFIX}")

    def scan(self) -> Iterator[FoundBlock]:
        """Every well-formed block file under the root; deletes corrupt and stale temporary files.

        Files placed where another key belongs are skipped. Reads only headers.
        """
        now = time.time()
        for shard in _subdirectories(self._root):
            for leaf in _subdirectories(shard):
                for entry in _entries(leaf):
                    if entry.name.endswith(_TEMP_SUFFIX):
                        _remove_if_stale(entry, now)
                    elif entry.name.endswith(_BLOCK_SUFFIX):
                        found = self._examine(entry)
                        if found is not None:
                            yield found

    def _examine(self, entry: os.DirEntry[str]) -> FoundBlock | None:
        try:
            header = read_header(entry.path)
            mtime = entry.stat().st_mtime
        except (OSError, CorruptBlockError):
            return None
        if self.path_of(header.key) != entry.path:
            return None
        return FoundBlock(header.key, header.payload_len, mtime)


def _entries(directory: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except OSError:
        return []


def _subdirectories(directory: str) -> Iterator[str]:
    for entry in _entries(directory):
        if len(entry.name) == 2 and entry.is_dir(follow_symlinks=False):
            yield entry.path


def _remove_if_stale(entry: os.DirEntry[str], now: float) -> None:
    """Delete a temporary file whose writer is gone (its pid is not running) or that is old."""
    try:
        pid = int(entry.name.split(".")[1])
        if _pid_running(pid) and now - entry.stat().st_mtime < STALE_TEMP_SECONDS:
            return
        os.unlink(entry.path)
    except (OSError, ValueError, IndexError):
        return


def _pid_running(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
