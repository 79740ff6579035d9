"""The file tier trusts nothing under its root: owner and modes checked, no symlink followed, no entry hangs it."""

from __future__ import annotations

import os
import shutil
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from kvcontract import LookupResult, TierJob
from kvcontract.assembly import build_tier
from kvcontract.config import FileTierConfig, KVContractConfig
from kvcontract.tiers import FileTier
from tests.tiers.support import IDENTITY, MakeTier, drain, fill, finishes, key, load, needs_root, pattern, store

OTHER_UID = 54_321


def path_of(tier: FileTier, index: int) -> Path:
    """The file of ``key(index)`` in ``tier`` (whatever the root's modes)."""
    return tier.block_path(key(index))


def mode(path: Path) -> int:
    """Permission bits of ``path`` itself."""
    return path.lstat().st_mode & 0o7777


@needs_root
def test_a_root_owned_by_another_user_is_refused_unless_trusted(tmp_path: Path, host: torch.Tensor) -> None:
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    os.chown(root, OTHER_UID, -1)
    with pytest.raises(PermissionError, match=rf"{root} belongs to uid {OTHER_UID}.*trust_shared_root"):
        FileTier(root, 4, host, identity=IDENTITY)
    FileTier(root, 4, host, identity=IDENTITY, trust_shared_root=True).shutdown()


@pytest.mark.parametrize(
    ("root_mode", "umask", "refused"),
    [
        (0o770, 0o077, "group"),
        (0o707, 0o077, "others"),
        (0o777, 0o077, "group and others"),
        (0o1777, 0o077, "group and others"),
        (0o707, 0o007, "others"),
        (0o770, 0o007, None),
        (0o755, 0o077, None),
    ],
)
def test_a_root_writable_by_group_or_others_is_refused_unless_the_umask_or_trust_admits_them(
    tmp_path: Path, host: torch.Tensor, root_mode: int, umask: int, refused: str | None
) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    os.chmod(root, root_mode)
    if refused is not None:
        with pytest.raises(PermissionError, match=rf"{root} is writable by {refused} .*chmod go-w"):
            FileTier(root, 4, host, identity=IDENTITY, umask=umask)
        FileTier(root, 4, host, identity=IDENTITY, umask=umask, trust_shared_root=True).shutdown()
    else:
        FileTier(root, 4, host, identity=IDENTITY, umask=umask).shutdown()


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A process umask of 0, so that only the tier's own modes keep its files private."""
    old = os.umask(0)
    yield
    os.umask(old)


@pytest.mark.usefixtures("open_umask")
@pytest.mark.parametrize(("umask", "file_mode", "dir_mode"), [(0o077, 0o600, 0o700), (0o007, 0o660, 0o770)])
def test_files_and_directories_get_the_tier_modes(
    make_tier: MakeTier,
    tmp_path: Path,
    host: torch.Tensor,
    job_ids: Iterator[int],
    umask: int,
    file_mode: int,
    dir_mode: int,
) -> None:
    tier = FileTier(tmp_path / "new" / "cache", 4, host, identity=IDENTITY, umask=umask)
    try:
        assert store(tier, job_ids, [key(0)], [0]).success
        file = path_of(tier, 0)
        assert mode(file) == file_mode
        assert [mode(d) for d in (file.parent, file.parent.parent, tier.root)] == [dir_mode] * 3
    finally:
        tier.shutdown()


def test_a_bad_umask_is_refused(tmp_path: Path, host: torch.Tensor) -> None:
    with pytest.raises(ValueError, match="umask 256 must be between 0o000 and 0o077"):
        FileTier(tmp_path, 4, host, identity=IDENTITY, umask=0o400)


def test_a_symlinked_shard_directory_is_never_written_through(
    make_tier: MakeTier, tmp_path: Path, host: torch.Tensor, job_ids: Iterator[int]
) -> None:
    tier = make_tier()
    outside = tmp_path / "outside"
    outside.mkdir()
    shard = path_of(tier, 0).parent.parent
    shard.symlink_to(outside, target_is_directory=True)
    fill(host, [0], [7])
    assert store(tier, job_ids, [key(0)], [0]).success
    assert list(outside.iterdir()) == []
    assert not shard.is_symlink() and path_of(tier, 0).is_file()
    assert load(tier, job_ids, [key(0)], [1]).success
    assert torch.equal(host[1], pattern(7))


def test_a_symlinked_shard_directory_is_never_read_nor_deleted_through(
    make_tier: MakeTier, tmp_path: Path, host: torch.Tensor, job_ids: Iterator[int]
) -> None:
    tier = make_tier(capacity=1)
    fill(host, [0], [7])
    store(tier, job_ids, [key(0)], [0])
    leaf = path_of(tier, 0).parent
    outside = tmp_path / "outside"
    shutil.move(leaf, outside)
    leaf.symlink_to(outside, target_is_directory=True)
    host[1].fill_(1)
    assert not load(tier, job_ids, [key(0)], [1]).success
    assert not host[1].any()
    assert tier.lookup(key(0)) is LookupResult.MISS
    store(tier, job_ids, [key(0)], [0])
    store(tier, job_ids, [key(1)], [0])  # evicts key 0: its file goes, never the one outside
    assert [p.name for p in outside.iterdir()] == [path_of(tier, 0).name]


def test_a_symlinked_block_file_is_corrupt_and_never_followed(
    make_tier: MakeTier, tmp_path: Path, host: torch.Tensor, job_ids: Iterator[int]
) -> None:
    """The link points at a valid block of the same key: following it would load someone else's bytes."""
    tier = make_tier()
    fill(host, [0], [7])
    store(tier, job_ids, [key(0)], [0])
    other = make_tier(root=tmp_path / "other")
    fill(host, [0], [8])
    store(other, job_ids, [key(0)], [0])
    target = path_of(other, 0)
    path_of(tier, 0).unlink()
    path_of(tier, 0).symlink_to(target)
    host[1].fill_(1)
    assert not load(tier, job_ids, [key(0)], [1]).success
    assert not host[1].any(), "bytes were read through a symlink"
    assert not path_of(tier, 0).is_symlink() and target.is_file()
    assert tier.lookup(key(0)) is LookupResult.MISS


def make_fifo(path: Path) -> None:
    os.mkfifo(path)


def make_directory(path: Path) -> None:
    (path / "inside").mkdir(parents=True)


def make_socket(path: Path) -> None:
    """A Unix socket bound at ``path`` (by a name relative to its directory: socket paths are short)."""
    here = os.getcwd()
    os.chdir(path.parent)
    try:
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(path.name)
    finally:
        os.chdir(here)


def make_device(path: Path) -> None:
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))


@pytest.fixture(params=["fifo", "directory", "socket", pytest.param("device", marks=needs_root)])
def hostile(request: pytest.FixtureRequest) -> Callable[[Path], None]:
    """One way to put something that is not a regular file where a block file belongs."""
    kinds: dict[str, Callable[[Path], None]] = {
        "fifo": make_fifo,
        "directory": make_directory,
        "socket": make_socket,
        "device": make_device,
    }
    return kinds[request.param]


def test_an_entry_that_is_no_regular_file_fails_a_load_without_hanging_it_or_the_shutdown(
    make_tier: MakeTier, host: torch.Tensor, job_ids: Iterator[int], hostile: Callable[[Path], None]
) -> None:
    tier = make_tier()
    fill(host, [0], [7])
    store(tier, job_ids, [key(0)], [0])
    path_of(tier, 0).unlink()
    hostile(path_of(tier, 0))
    host[1].fill_(1)
    assert tier.submit_load(TierJob(99, [key(0)], [1]))
    finishes(tier.shutdown)
    assert not drain(tier, [99])[99].success
    assert not host[1].any()
    assert not os.path.lexists(path_of(tier, 0)), "the corrupt entry stays"


def test_an_entry_that_is_no_regular_file_never_blocks_a_store_of_its_key(
    make_tier: MakeTier, host: torch.Tensor, job_ids: Iterator[int], hostile: Callable[[Path], None]
) -> None:
    tier = make_tier()
    path = path_of(tier, 0)
    path.parent.mkdir(parents=True)
    hostile(path)
    fill(host, [0], [7])
    assert store(tier, job_ids, [key(0)], [0]).success
    assert load(tier, job_ids, [key(0)], [1]).success
    assert torch.equal(host[1], pattern(7))


def test_an_entry_that_is_no_regular_file_never_hangs_the_start_up_scan(
    make_tier: MakeTier, host: torch.Tensor, job_ids: Iterator[int], hostile: Callable[[Path], None]
) -> None:
    first = make_tier()
    store(first, job_ids, [key(0), key(1)], [0, 1])
    first.shutdown()
    path_of(first, 0).unlink()
    hostile(path_of(first, 0))
    second = finishes(lambda: make_tier())
    assert [second.lookup(key(i)) for i in (0, 1)] == [LookupResult.MISS, LookupResult.HIT]
    assert not os.path.lexists(path_of(first, 0))


@pytest.mark.parametrize("entry", ["file", "symlink", "fifo"])
def test_what_is_not_a_directory_where_a_shard_belongs_is_replaced_by_a_store(
    make_tier: MakeTier, tmp_path: Path, host: torch.Tensor, job_ids: Iterator[int], entry: str
) -> None:
    tier = make_tier()
    shard = path_of(tier, 0).parent.parent
    if entry == "file":
        shard.write_bytes(b"a file where the shard directory belongs")
    elif entry == "symlink":
        shard.symlink_to(tmp_path / "missing")
    else:
        os.mkfifo(shard)
    host[1].fill_(1)
    assert finishes(lambda: store(tier, job_ids, [key(0)], [0])).success
    assert shard.is_dir() and not shard.is_symlink()
    assert not (tmp_path / "missing").exists()


def test_build_tier_passes_the_security_and_event_settings(tmp_path: Path, host: torch.Tensor) -> None:
    config = KVContractConfig.model_validate({"manager": {"kind": "tiering"}})
    shared = FileTierConfig.model_validate(
        {"path": tmp_path / "shared", "capacity": 4, "umask": "007", "trust_shared_root": True, "enable_events": True}
    )
    assert shared.umask == 0o007
    (tmp_path / "shared").mkdir(mode=0o777)
    os.chmod(tmp_path / "shared", 0o777)
    tier = build_tier(shared, config, host, identity=IDENTITY)
    try:
        assert isinstance(tier, FileTier)
        job = TierJob(1, [key(0)], [0])
        assert tier.submit_store(job)
        drain(tier, [1])
        assert tier.take_events() != []
        assert mode(path_of(tier, 0)) == 0o660
    finally:
        tier.shutdown()
    with pytest.raises(PermissionError, match="writable by group and others"):
        build_tier(FileTierConfig(path=tmp_path / "shared", capacity=4), config, host, identity=IDENTITY)
    with pytest.raises(ValueError, match="umask 'rw' is not octal"):
        FileTierConfig.model_validate({"path": tmp_path, "capacity": 4, "umask": "rw"})
    with pytest.raises(ValueError, match="umask"):
        FileTierConfig(path=tmp_path, capacity=4, umask=0o700)
