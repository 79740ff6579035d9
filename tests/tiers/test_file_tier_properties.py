"""Property tests: a load yields exactly the bytes stored, whatever the faults, hostile entries, evictions and restarts."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
import threading
import time
import unittest.mock
from pathlib import Path

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from typing_extensions import override

from kvcontract import LookupResult, OffloadKey, TierJob
from kvcontract.testing import example_identity
from kvcontract.tiers import FileTier
from kvcontract.tiers.file import block_file
from kvcontract.tiers.file.block_dir import BlockDirectory
from kvcontract.tiers.file.block_file import BlockLocation, CorruptBlockError
from kvcontract.tiers.integrity import ValueMac
from tests.profiles import stateful_settings
from tests.tiers.support import WRITE_BLOCK, drain, key

BYTES = 64
IDENTITY = example_identity(BYTES)
FINGERPRINT = IDENTITY.fingerprint
KEYS = 6
CAPACITY = 4
HOST_BLOCKS = 3
HOSTILE = ("symlink-to-a-valid-block", "fifo", "directory", "file-of-another-key")
"""What someone who may write the root puts where a block file belongs."""
_HOLD_LIMIT_S = 60.0
"""Guard against a hang only: a held write is released within the same rule."""
_WRITE_TICK_NS = 1_000_000
"""Each written block file's mtime is the last one's plus this: two writes within one clock
tick share an mtime, and which writes do depends on timing, so a restart's recency order
(by mtime) would differ between a run and hypothesis' replay of it."""


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    block_key=st.binary(min_size=1, max_size=80),
    payload=st.binary(max_size=300),
    damage=st.integers(min_value=0),
    truncate=st.booleans(),
)
def test_any_damaged_byte_or_cut_is_detected(
    tmp_path: Path, block_key: bytes, payload: bytes, damage: int, truncate: bool
) -> None:
    path = tmp_path / "block.kvb"
    k = OffloadKey(block_key)
    directory = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        at = BlockLocation(directory, path.name)
        block_file.write_block(at, k, memoryview(payload), fingerprint=FINGERPRINT)
        out = bytearray(len(payload))
        block_file.read_block(at, k, memoryview(out), fingerprint=FINGERPRINT)
        assert out == payload
        data = bytearray(path.read_bytes())
        where = damage % len(data)
        path.write_bytes(bytes(data[:where]) if truncate else _flipped(data, where))
        try:
            block_file.read_block(at, k, memoryview(out), fingerprint=FINGERPRINT)
        except CorruptBlockError:
            return
        raise AssertionError(f"damage at byte {where} of {len(data)} went unnoticed")
    finally:
        os.close(directory)


def _flipped(data: bytearray, where: int) -> bytes:
    data[where] ^= 0x5A
    return bytes(data)


@stateful_settings(steps=50, fast_examples=20)
class FileTierMachine(RuleBasedStateMachine):
    """A file tier against a model of the bytes each readable key must load as.

    Faults: writes that fail for chosen keys, files corrupted, truncated or replaced by
    hostile entries on disk, shard directories swapped for symlinks, and restarts on the
    same root. Misuse (host block ids out of range, a job id still in flight) must raise
    and change nothing.
    """

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="file-tier-machine-"))
        self.outside = Path(tempfile.mkdtemp(prefix="file-tier-outside-"))
        self.outside_files: dict[Path, int] = {}
        self.host = torch.zeros((HOST_BLOCKS, BYTES), dtype=torch.uint8)
        self.failing: set[OffloadKey] = set()
        self.held: set[OffloadKey] = set()
        self.release = threading.Event()
        self.patcher = unittest.mock.patch(WRITE_BLOCK, self.write_or_fail)
        self.patcher.start()
        self.tier = self.start()
        self.names = BlockDirectory(self.root, IDENTITY.fingerprint_hex)
        self.content: dict[OffloadKey, bytes] = {}
        self.corrupt: set[OffloadKey] = set()
        self.job_ids = itertools.count()
        self.write_times = itertools.count(time.time_ns(), _WRITE_TICK_NS)

    def start(self) -> FileTier:
        """A tier on this machine's root, recording events.

        One I/O thread: with two, the blocks of one job are written in either order, the
        order of their times decides which survive a restart over capacity, and hypothesis
        needs runs that replay alike (concurrency has its own tests in test_file_tier.py).
        """
        return FileTier(self.root, CAPACITY, self.host, identity=IDENTITY, io_threads=1, enable_events=True)

    def write_or_fail(
        self, at: BlockLocation, k: OffloadKey, payload: memoryview, *, fingerprint: bytes, mac: ValueMac | None = None
    ) -> None:
        """The tier's block writer, failing for the keys in ``failing`` and waiting for ``release`` for those in ``held``."""
        if k in self.held:
            assert self.release.wait(_HOLD_LIMIT_S), "a held write was never released"
        if k in self.failing:
            raise OSError(5, "injected write fault")
        block_file.write_block(at, k, payload, fingerprint=fingerprint, mac=mac)
        written = next(self.write_times)
        os.utime(at.name, ns=(written, written), dir_fd=at.directory, follow_symlinks=False)

    def forget_missing(self) -> list[OffloadKey]:
        """Drop from the model the keys the tier no longer holds; those keys."""
        gone = [k for k in self.content if self.tier.lookup(k) is LookupResult.MISS]
        for k in gone:
            del self.content[k]
            self.corrupt.discard(k)
        return gone

    def snapshot(self) -> tuple[tuple[LookupResult, ...], int]:
        """What a refused call must leave as it was: every key's lookup and the blocks indexed."""
        return tuple(self.tier.lookup(key(i)) for i in range(KEYS)), len(self.tier)

    def fill_host(self, payloads: list[bytes]) -> None:
        """Put ``payloads[i]`` in host block ``i``."""
        for row, payload in enumerate(payloads):
            self.host[row].copy_(torch.frombuffer(bytearray(payload), dtype=torch.uint8))

    @rule(
        indices=st.lists(st.integers(0, KEYS - 1), min_size=1, max_size=HOST_BLOCKS, unique=True),
        payloads=st.lists(st.binary(min_size=BYTES, max_size=BYTES), min_size=HOST_BLOCKS, max_size=HOST_BLOCKS),
    )
    def store(self, indices: list[int], payloads: list[bytes]) -> None:
        keys = [key(i) for i in indices]
        new = [k for k in keys if self.tier.lookup(k) is LookupResult.MISS]
        self.fill_host(payloads[: len(keys)])
        job_id = next(self.job_ids)
        assert self.tier.submit_store(TierJob(job_id, keys, range(len(keys))))
        result = drain(self.tier, [job_id])[job_id]
        assert result.success == all(k not in self.failing for k in new)
        for k, payload in zip(keys, payloads):
            if k in new:
                expected = LookupResult.MISS if k in self.failing else LookupResult.HIT
                assert self.tier.lookup(k) is expected
                if expected is LookupResult.HIT:
                    self.content[k] = payload
        self.forget_missing()

    @rule(indices=st.lists(st.integers(0, KEYS - 1), min_size=1, max_size=HOST_BLOCKS, unique=True))
    def load(self, indices: list[int]) -> None:
        keys = [key(i) for i in indices]
        readable = all(self.tier.lookup(k) is LookupResult.HIT for k in keys)
        self.host.fill_(0xA5)
        job_id = next(self.job_ids)
        assert self.tier.submit_load(TierJob(job_id, keys, range(len(keys)))) == readable
        if not readable:
            return
        result = drain(self.tier, [job_id])[job_id]
        assert result.success == all(k not in self.corrupt for k in keys)
        for row, k in enumerate(keys):
            loaded = bytes(self.host[row].numpy().tobytes())
            if k in self.corrupt:
                assert loaded == bytes(BYTES)
                assert self.tier.lookup(k) is LookupResult.MISS
            else:
                assert loaded == self.content[k]
        self.forget_missing()

    @precondition(lambda self: bool(self.content.keys() - self.corrupt))
    @rule(data=st.data(), truncate=st.booleans())
    def damage_a_file(self, data: st.DataObject, truncate: bool) -> None:
        k = data.draw(st.sampled_from(sorted(self.content.keys() - self.corrupt)))
        path = Path(self.names.path_of(k))
        raw = bytearray(path.read_bytes())
        written = path.stat().st_mtime_ns
        path.write_bytes(bytes(raw[:-1]) if truncate else _flipped(raw, len(raw) - 1))
        os.utime(path, ns=(written, written))  # the machine's time, not the wall clock's: runs replay alike
        self.corrupt.add(k)

    @rule(index=st.integers(0, KEYS - 1), hostile=st.sampled_from(HOSTILE))
    def plant_a_hostile_entry(self, index: int, hostile: str) -> None:
        """Whatever sits where a block file belongs, a stored key is corrupt and a free key stays storable."""
        k = key(index)
        path = Path(self.names.path_of(k))
        if path.parent.is_symlink() or path.parent.parent.is_symlink():
            return
        # A free key's old file may still be being deleted by the tier: then what is planted may go too.
        with contextlib.suppress(OSError) if k not in self.content else contextlib.nullcontext():
            self.plant(index, path, hostile)
        if k in self.content:
            self.corrupt.add(k)

    def plant(self, index: int, path: Path, hostile: str) -> None:
        """Replace what is at ``path``, where the block file of ``key(index)`` belongs, with ``hostile``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        path.unlink(missing_ok=True)
        if hostile == "symlink-to-a-valid-block":
            target = self.outside / f"valid-{index}.kvb"
            directory = os.open(self.outside, os.O_RDONLY | os.O_DIRECTORY)
            try:
                block_file.write_block(
                    BlockLocation(directory, target.name),
                    key(index),
                    memoryview(b"\x5a" * BYTES),
                    fingerprint=FINGERPRINT,
                )
            finally:
                os.close(directory)
            self.outside_files[target] = target.stat().st_ino
            path.symlink_to(target)
        elif hostile == "fifo":
            os.mkfifo(path)
        elif hostile == "directory":
            (path / "inside").mkdir(parents=True)
        else:
            other = key((index + 1) % KEYS)
            directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                block_file.write_block(
                    BlockLocation(directory, path.name), other, memoryview(bytes(BYTES)), fingerprint=FINGERPRINT
                )
                written = next(self.write_times)
                os.utime(path.name, ns=(written, written), dir_fd=directory, follow_symlinks=False)
            finally:
                os.close(directory)

    @precondition(lambda self: bool(self.content))
    @rule(data=st.data())
    def swap_a_shard_directory_for_a_symlink(self, data: st.DataObject) -> None:
        """A leaf directory moved outside the root and linked back: never read, never written through."""
        k = data.draw(st.sampled_from(sorted(self.content)))
        leaf = Path(self.names.path_of(k)).parent
        if leaf.is_symlink() or not leaf.is_dir():
            return
        moved = Path(tempfile.mkdtemp(dir=self.outside)) / "leaf"
        shutil.move(leaf, moved)
        for path in [moved.parent, moved, *moved.rglob("*")]:
            self.outside_files[path] = path.lstat().st_ino
        leaf.symlink_to(moved, target_is_directory=True)
        for other in self.content:
            if Path(self.names.path_of(other)).parent == leaf:
                self.corrupt.add(other)

    @rule(index=st.integers(0, KEYS - 1), fail=st.booleans())
    def set_write_fault(self, index: int, fail: bool) -> None:
        if fail:
            self.failing.add(key(index))
        else:
            self.failing.discard(key(index))

    @rule(indices=st.lists(st.integers(0, KEYS - 1), max_size=KEYS, unique=True))
    def touch(self, indices: list[int]) -> None:
        self.tier.touch([key(i) for i in indices])

    @rule(
        indices=st.lists(st.integers(0, KEYS - 1), min_size=1, max_size=HOST_BLOCKS, unique=True),
        bad=st.integers(HOST_BLOCKS, HOST_BLOCKS + 100),
        load=st.booleans(),
    )
    def misuse_host_block_ids_out_of_range(self, indices: list[int], bad: int, load: bool) -> None:
        keys = [key(i) for i in indices]
        host_ids = [*range(len(keys) - 1), bad]
        before = self.snapshot()
        self.tier.take_events()
        submit = self.tier.submit_load if load else self.tier.submit_store
        job_id = next(self.job_ids)
        try:
            submit(TierJob(job_id, keys, host_ids))
        except ValueError as error:
            assert "outside" in str(error)
        else:
            raise AssertionError("host block ids out of range were accepted")
        assert self.snapshot() == before
        assert self.tier.take_events() == [] and self.tier.get_finished() == []
        assert submit(TierJob(job_id, [], [])), "the refused job's id stayed taken"
        assert drain(self.tier, [job_id])[job_id].success

    @precondition(lambda self: any(self.tier.lookup(key(i)) is LookupResult.MISS for i in range(KEYS)))
    @rule(data=st.data(), payload=st.binary(min_size=BYTES, max_size=BYTES), load=st.booleans())
    def misuse_a_job_id_still_in_flight(self, data: st.DataObject, payload: bytes, load: bool) -> None:
        """A second job under the id of a store held in flight is refused and changes nothing."""
        free = [key(i) for i in range(KEYS) if self.tier.lookup(key(i)) is LookupResult.MISS]
        k = data.draw(st.sampled_from(free))
        other = data.draw(st.sampled_from([key(i) for i in range(KEYS) if key(i) != k]))
        self.fill_host([payload])
        job_id = next(self.job_ids)
        self.held.add(k)
        self.release.clear()
        try:
            assert self.tier.submit_store(TierJob(job_id, [k], [0]))
            before = self.snapshot()
            self.tier.take_events()
            submit = self.tier.submit_load if load else self.tier.submit_store
            try:
                accepted = submit(TierJob(job_id, [other], [1]))
            except ValueError as error:
                assert "still in flight" in str(error)
            else:
                assert load and not accepted, "a job id in flight was accepted again"
            assert self.snapshot() == before
            assert self.tier.take_events() == [] and self.tier.get_finished() == []
        finally:
            self.release.set()
            self.held.discard(k)
        result = drain(self.tier, [job_id])[job_id]
        assert result.success == (k not in self.failing)
        if result.success:
            self.content[k] = payload
        self.forget_missing()

    @rule()
    def restart(self) -> None:
        damaged = set(self.corrupt)
        self.tier.shutdown()
        assert not self.tier.submit_store(TierJob(next(self.job_ids), [key(0)], [0]))
        self.tier = self.start()
        lost = self.forget_missing()
        assert set(lost) <= damaged, "a restart lost intact blocks"

    @invariant()
    def only_known_blocks_are_hits(self) -> None:
        for i in range(KEYS):
            if self.tier.lookup(key(i)) is LookupResult.HIT:
                assert key(i) in self.content
        assert len(self.tier) <= CAPACITY

    @invariant()
    def nothing_outside_the_root_changes(self) -> None:
        found = {path: path.lstat().st_ino for path in self.outside.rglob("*")}
        assert found == self.outside_files, "the tier wrote or deleted through a symlink"

    @override
    def teardown(self) -> None:
        self.release.set()
        self.tier.shutdown()
        self.names.close()
        self.patcher.stop()
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.outside, ignore_errors=True)


TestFileTierMachine = FileTierMachine.TestCase
