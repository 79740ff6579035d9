"""Where a file tier's blocks live under its root: the root's checks, sharded names, the start-up scan.

A key's file is ``root/<identity>/ab/cd/abcd....kvb``: ``<identity>`` is the 32 hex digits
of the block identity's fingerprint, so engines of many models share one root side by side,
each reading, indexing and evicting only its own directory; the file is named by a 128-bit
BLAKE2b hash of the key (the key itself is in the header). The root is opened once and
checked (see :class:`BlockDirectory`); below it every directory is opened relative to its
parent with ``O_NOFOLLOW``, so no symlink inside the root is ever followed: a symlink (or
any other non-directory) where a directory belongs is corrupt, skipped by reads and the
scan and replaced by a store.

Format 1 kept its shards right under the root (``root/ab/cd/...``, no identity):
:meth:`BlockDirectory.remove_format_1_shards` deletes them, since no engine can tell whose
KV they hold.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import time
import weakref
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

from kvcontract.contracts.keys import OffloadKey
from kvcontract.tiers.file.block_file import (
    TEMP_SUFFIX,
    BlockLocation,
    CorruptBlockError,
    delete_block,
    read_header,
    remove_directory,
)

__all__ = [
    "DEFAULT_UMASK",
    "STALE_TEMP_SECONDS",
    "BlockDirectory",
    "ForeignBlock",
    "FoundBlock",
    "check_umask",
    "root_owner_problem",
]

STALE_TEMP_SECONDS = 3600.0
"""A temporary file this old is abandoned even if its writer's pid is alive (pid reuse, other hosts)."""
DEFAULT_UMASK = 0o077
"""Files 0600 and directories 0700: only the tier's own user reads or writes its blocks."""
_BLOCK_SUFFIX = ".kvb"
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_NOT_A_DIRECTORY = (errno.ELOOP, errno.ENOTDIR)
"""What opening a symlink or a non-directory with ``_DIRECTORY_FLAGS`` raises."""
_TRUST_HINT = "or set trust_shared_root (config: trust_shared_root: true) if everyone who can write it is trusted"


@dataclass(frozen=True, slots=True)
class ForeignBlock:
    """A block file of another identity found in this identity's directory (and deleted)."""

    name: str


@dataclass(frozen=True, slots=True)
class FoundBlock:
    """A well-formed block file found by the scan (its checksum is checked on read)."""

    key: OffloadKey
    payload_len: int
    mtime: float


def check_umask(umask: int) -> int:
    """``umask`` if it is a permission mask that leaves the owner every right; else ``ValueError``."""
    if not 0 <= umask <= 0o077:
        raise ValueError(
            f"file tier umask {umask!r} must be between 0o000 and 0o077 (owner bits clear), "
            "e.g. 0o077 for files 0600, or 0o007 to share the blocks with a group"
        )
    return umask


class BlockDirectory:
    """Maps keys to sharded files under ``root/<identity>``, opens them without following symlinks, and finds blocks.

    ``identity`` is the hex fingerprint of the block identity whose blocks this directory holds.

    Files are created with mode ``0o666 & ~umask`` and directories ``0o777 & ~umask``. The
    root must belong to this process's user and be writable by nobody the umask does not
    admit (whoever can write it can delete or replace blocks), unless ``trust_shared_root``
    says that everyone who can write it is trusted. The root's own path is resolved as
    usual; its ancestors are the operator's to protect.
    """

    def __init__(
        self, root: Path, identity: str, *, umask: int = DEFAULT_UMASK, trust_shared_root: bool = False
    ) -> None:
        self.file_mode: int = 0o666 & ~check_umask(umask)
        self.dir_mode: int = 0o777 & ~umask
        existed = root.exists()
        if existed and not root.is_dir():
            raise NotADirectoryError(f"file tier root {root} exists and is not a directory")
        root.mkdir(mode=self.dir_mode, parents=True, exist_ok=True)
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        self._close = weakref.finalize(self, os.close, fd)
        try:
            if not existed:
                os.fchmod(fd, self.dir_mode)
            if not trust_shared_root:
                _check_root_owner(root, os.fstat(fd), umask)
            identity_fd = self._subdirectory(fd, identity, create=True)
        except OSError:
            self._close()
            raise
        self._close_identity = weakref.finalize(self, os.close, identity_fd)
        self.root = root
        self.identity_root: Path = root / identity
        """The directory that holds this identity's blocks."""
        self._root_fd = fd
        self._identity_fd = identity_fd
        self._root = str(self.identity_root)

    def close(self) -> None:
        """Release the directories' descriptors; nothing is read or written after."""
        self._close_identity()
        self._close()

    def path_of(self, key: OffloadKey) -> str:
        """The file of ``key``, for people and tests: the tier itself reaches it through :meth:`locate`."""
        name = _name_of(key)
        return os.path.join(self._root, name[:2], name[2:4], name)

    def remove_format_1_shards(self) -> int:
        """Delete the shard directories format 1 kept right under the root; how many there were.

        Their blocks carry no identity, so they can never be served; deleting them returns
        their disk space. An identity's directory (32 hex digits) is never touched.
        """
        removed = 0
        for entry in _entries(self._root_fd):
            if len(entry.name) == 2 and entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    remove_directory(self._root_fd, entry.name)
                    removed += 1
        return removed

    @contextlib.contextmanager
    def locate(self, key: OffloadKey, *, create: bool = False) -> Generator[BlockLocation, None, None]:
        """Where ``key``'s file belongs, its directory open while the block is within.

        Without ``create``, a missing shard directory or anything else in its place raises
        ``OSError``. With ``create`` the directories are made, replacing what is not one.
        """
        # Six system calls more per read than one open by path (two openat and two close here,
        # an lstat and an fstat in read_block): 27 us of CPU per 128 KiB block on the 2-core
        # dev VM (61 against 34, tools-style interleaved thread_time), noise at 2 MiB and up.
        name = _name_of(key)
        shard = self._subdirectory(self._identity_fd, name[:2], create)
        try:
            leaf = self._subdirectory(shard, name[2:4], create)
        finally:
            os.close(shard)
        try:
            yield BlockLocation(leaf, name, self.file_mode)
        finally:
            os.close(leaf)

    def _subdirectory(self, parent: int, name: str, create: bool) -> int:
        """Open directory ``name`` of ``parent``, following no symlink; with ``create``, make it."""
        try:
            return os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
        except OSError as error:
            if not create or error.errno not in _NOT_A_DIRECTORY:
                raise
            os.unlink(name, dir_fd=parent)  # a symlink or file where a directory belongs: corrupt
        try:
            os.mkdir(name, self.dir_mode, dir_fd=parent)
            created = True
        except FileExistsError:
            created = False  # another writer made it meanwhile
        fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
        if created:
            os.fchmod(fd, self.dir_mode)  # the process umask may have narrowed the mode
        return fd

    def scan(self, fingerprint: bytes) -> Iterator[FoundBlock | ForeignBlock]:
        """Every well-formed block file of this identity; deletes corrupt entries and stale temporary files.

        Files placed where another key belongs are skipped; a file of another identity than
        ``fingerprint`` is deleted (no engine looks for it here) and yielded as a
        :class:`ForeignBlock`. Reads only headers; opens no symlink and nothing that is not a
        regular file, so no entry can hang the scan.
        """
        now = time.time()
        for shard_name, shard in _subdirectories(self._identity_fd):
            for leaf_name, leaf in _subdirectories(shard):
                for entry in _entries(leaf):
                    if entry.name.endswith(TEMP_SUFFIX):
                        _remove_if_stale(leaf, entry, now)
                    elif entry.name.endswith(_BLOCK_SUFFIX):
                        found = self._examine(
                            BlockLocation(leaf, entry.name), entry, shard_name + leaf_name, fingerprint
                        )
                        if found is not None:
                            yield found

    @staticmethod
    def _examine(
        location: BlockLocation, entry: os.DirEntry[str], prefix: str, fingerprint: bytes
    ) -> FoundBlock | ForeignBlock | None:
        try:
            header = read_header(location)
            mtime = entry.stat(follow_symlinks=False).st_mtime
        except (OSError, CorruptBlockError):
            return None
        name = _name_of(header.key)
        if name != location.name or not name.startswith(prefix):
            return None
        if header.fingerprint != fingerprint:
            delete_block(location)
            return ForeignBlock(location.name)
        return FoundBlock(header.key, header.payload_len, mtime)


def _name_of(key: OffloadKey) -> str:
    return hashlib.blake2b(key, digest_size=16).hexdigest() + _BLOCK_SUFFIX


def _check_root_owner(root: Path, info: os.stat_result, umask: int) -> None:
    """Refuse a root another user owns, or that group or others may write beyond what ``umask`` admits."""
    problem = root_owner_problem(root, info, umask)
    if problem is not None:
        raise PermissionError(problem)


def root_owner_problem(root: Path, info: os.stat_result, umask: int) -> str | None:
    """Why a root of status ``info`` is unsafe for a tier of ``umask`` (another owner, or writable by
    group or others beyond what ``umask`` admits), or ``None``: the config's machine check says the same."""
    if info.st_uid != os.geteuid():
        return (
            f"file tier root {root} belongs to uid {info.st_uid}, not to this process's uid "
            f"{os.geteuid()}: its owner could plant, swap or delete blocks. Use a directory of "
            f"your own (mkdir -m 700), {_TRUST_HINT}"
        )
    loose = info.st_mode & 0o022 & umask
    if loose:
        who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002)) if loose & bit)
        return (
            f"file tier root {root} is writable by {who} (mode {info.st_mode & 0o7777:#o}), who "
            f"could plant, swap or delete blocks. Run chmod go-w {root}, widen the tier's umask "
            f"for a shared group, {_TRUST_HINT}"
        )
    return None


def _entries(directory: int) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except OSError:
        return []


def _subdirectories(parent: int) -> Iterator[tuple[str, int]]:
    """The shard directories of ``parent`` (two-character names), each open while it is yielded."""
    for entry in _entries(parent):
        if len(entry.name) != 2 or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            fd = os.open(entry.name, _DIRECTORY_FLAGS, dir_fd=parent)
        except OSError:
            continue  # replaced since the listing: skipped, like any non-directory
        try:
            yield entry.name, fd
        finally:
            os.close(fd)


def _remove_if_stale(directory: int, entry: os.DirEntry[str], now: float) -> None:
    """Delete a temporary file whose writer is gone (its pid is not running) or that is old."""
    try:
        pid = int(entry.name.split(".")[1])
        if _pid_running(pid) and now - entry.stat(follow_symlinks=False).st_mtime < STALE_TEMP_SECONDS:
            return
        os.unlink(entry.name, dir_fd=directory)
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
