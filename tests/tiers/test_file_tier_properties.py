"""Property tests: a load yields exactly the bytes stored, whatever the faults, evictions and restarts."""

from __future__ import annotations

import itertools
import shutil
import tempfile
import unittest.mock
from pathlib import Path

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from typing_extensions import override

from kvcontract import LookupResult, OffloadKey, TierJob
from kvcontract.tiers import FileTier, block_file
from kvcontract.tiers.block_dir import BlockDirectory
from kvcontract.tiers.block_file import CorruptBlockError
from tests.tiers.conftest import WRITE_BLOCK, drain, key

BYTES = 64
KEYS = 6
CAPACITY = 4
HOST_BLOCKS = 3


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
    path = str(tmp_path / "block.kvb")
    k = OffloadKey(block_key)
    block_file.write_block(path, str(tmp_path / ".tmp"), k, memoryview(payload))
    out = bytearray(len(payload))
    block_file.read_block(path, k, memoryview(out))
    assert out == payload
    data = bytearray(Path(path).read_bytes())
    where = damage % len(data)
    Path(path).write_bytes(bytes(data[:where]) if truncate else _flipped(data, where))
    try:
        block_file.read_block(path, k, memoryview(out))
    except CorruptBlockError:
        return
    raise AssertionError(f"damage at byte {where} of {len(data)} went unnoticed")


def _flipped(data: bytearray, where: int) -> bytes:
    data[where] ^= 0x5A
    return bytes(data)


@settings(max_examples=40, stateful_step_count=25, deadline=None)
class FileTierMachine(RuleBasedStateMachine):
    """A file tier against a model of the bytes each readable key must load as.

    Faults: writes that fail for chosen keys, files corrupted or truncated on disk, and
    restarts of the tier on the same root.
    """

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="file-tier-machine-"))
        self.host = torch.zeros((HOST_BLOCKS, BYTES), dtype=torch.uint8)
        self.failing: set[OffloadKey] = set()
        self.patcher = unittest.mock.patch(WRITE_BLOCK, self.write_or_fail)
        self.patcher.start()
        self.tier = self.start()
        self.content: dict[OffloadKey, bytes] = {}
        self.corrupt: set[OffloadKey] = set()
        self.job_ids = itertools.count()

    def start(self) -> FileTier:
        """A tier on this machine's root."""
        return FileTier(self.root, CAPACITY, self.host, io_threads=2)

    def write_or_fail(self, path: str, temp: str, k: OffloadKey, payload: memoryview) -> None:
        """The tier's block writer, failing for the keys in ``failing``."""
        if k in self.failing:
            raise OSError(5, "injected write fault")
        block_file.write_block(path, temp, k, payload)

    def forget_missing(self) -> list[OffloadKey]:
        """Drop from the model the keys the tier no longer holds; those keys."""
        gone = [k for k in self.content if self.tier.lookup(k) is LookupResult.MISS]
        for k in gone:
            del self.content[k]
            self.corrupt.discard(k)
        return gone

    @rule(
        indices=st.lists(st.integers(0, KEYS - 1), min_size=1, max_size=HOST_BLOCKS, unique=True),
        payloads=st.lists(
            st.binary(min_size=BYTES, max_size=BYTES), min_size=HOST_BLOCKS, max_size=HOST_BLOCKS
        ),
    )
    def store(self, indices: list[int], payloads: list[bytes]) -> None:
        keys = [key(i) for i in indices]
        new = [k for k in keys if self.tier.lookup(k) is LookupResult.MISS]
        for row, payload in enumerate(payloads[: len(keys)]):
            self.host[row].copy_(torch.frombuffer(bytearray(payload), dtype=torch.uint8))
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
        path = Path(BlockDirectory(self.root).path_of(k))
        raw = bytearray(path.read_bytes())
        path.write_bytes(bytes(raw[:-1]) if truncate else _flipped(raw, len(raw) - 1))
        self.corrupt.add(k)

    @rule(index=st.integers(0, KEYS - 1), fail=st.booleans())
    def set_write_fault(self, index: int, fail: bool) -> None:
        if fail:
            self.failing.add(key(index))
        else:
            self.failing.discard(key(index))

    @rule(indices=st.lists(st.integers(0, KEYS - 1), max_size=KEYS, unique=True))
    def touch(self, indices: list[int]) -> None:
        self.tier.touch([key(i) for i in indices])

    @rule()
    def restart(self) -> None:
        damaged = set(self.corrupt)
        self.tier.shutdown()
        self.tier = self.start()
        lost = self.forget_missing()
        assert set(lost) <= damaged, "a restart lost intact blocks"

    @invariant()
    def only_known_blocks_are_hits(self) -> None:
        for i in range(KEYS):
            if self.tier.lookup(key(i)) is LookupResult.HIT:
                assert key(i) in self.content
        assert len(self.tier) <= CAPACITY

    @override
    def teardown(self) -> None:
        self.tier.shutdown()
        self.patcher.stop()
        shutil.rmtree(self.root, ignore_errors=True)


TestFileTierMachine = FileTierMachine.TestCase
