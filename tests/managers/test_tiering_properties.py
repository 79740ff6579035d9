"""Random use of a primary and a real file tier, with faults, restarts and corrupt files.

After every step: a block loaded into host memory is always the block that was stored
under its key (contents are a function of the key, as KV blocks are of their prefix),
and neither the primary nor the tier holds more than its capacity. Misuse rules make calls
that must raise ``ValueError`` and leave the primary exactly as it was: completing a store a
promotion owns or another request prepared, a duplicate, a load never prepared.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import hypothesis.strategies as st
import pytest
import torch
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from typing_extensions import override

import kvcontract.tiers.file.tier as file_tier_module
from kvcontract import BlockIdsSpec, LookupResult, OffloadKey, ReqContext, make_offload_key
from kvcontract.managers import CPUOffloadingManager, TieringOffloadingManager
from kvcontract.testing import example_identity
from kvcontract.tiers import FileTier
from kvcontract.tiers.file.block_dir import BlockDirectory
from kvcontract.tiers.file.block_file import BlockLocation, write_block
from tests.managers.support import snapshot
from tests.profiles import stateful_settings

HOST_BLOCKS = 2
TIER_BLOCKS = 6
BLOCK_BYTES = 256
IDENTITY = example_identity(BLOCK_BYTES)
KEYS = [make_offload_key(i.to_bytes(8, "big")) for i in range(8)]
WAIT_SECONDS = 5.0
ctx = ReqContext("property")


def content(key: OffloadKey) -> torch.Tensor:
    """The bytes every store of ``key`` writes."""
    seed = int.from_bytes(key[:8], "big")
    return (torch.arange(BLOCK_BYTES, dtype=torch.int64) * 31 + seed * 97).remainder(251).to(torch.uint8)


class Faults:
    """Switches that the patched write function of the file tier obeys."""

    fail_writes = False


def flaky_write_block(location: BlockLocation, key: OffloadKey, payload: memoryview, *, fingerprint: bytes) -> None:
    """The tier's write, failing while ``Faults.fail_writes`` is set."""
    if Faults.fail_writes:
        raise OSError("injected write failure")
    write_block(location, key, payload, fingerprint=fingerprint)


class TieringMachine(RuleBasedStateMachine):
    """Stores, loads, write failures, corrupt files and restarts against a real file tier."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="kvcontract-tiering-"))
        self.loaded_ok = 0
        self._start()

    def _start(self) -> None:
        self.host = torch.zeros((HOST_BLOCKS, BLOCK_BYTES), dtype=torch.uint8)
        self.primary = CPUOffloadingManager(HOST_BLOCKS)
        self.tier = FileTier(self.root, TIER_BLOCKS, self.host, identity=IDENTITY, io_threads=2)
        self.manager = TieringOffloadingManager(self.primary, [self.tier])

    @rule(index=st.integers(0, len(KEYS) - 1), success=st.booleans())
    def store(self, index: int, success: bool) -> None:
        key = KEYS[index]
        if self.manager.lookup(key, ctx) is not LookupResult.MISS:
            return
        plan = self.manager.prepare_store([key], ctx)
        if plan is None or key not in plan.keys_to_store:
            return
        spec = plan.store_spec
        assert isinstance(spec, BlockIdsSpec)
        self.host[spec.block_ids[0]] = content(key) if success else 0
        self.manager.complete_store([key], ctx, success=success)

    @rule(index=st.integers(0, len(KEYS) - 1))
    def load(self, index: int) -> None:
        key = KEYS[index]
        answer = self.manager.lookup(key, ctx)
        deadline = time.monotonic() + WAIT_SECONDS
        while answer is LookupResult.RETRY:
            assert time.monotonic() < deadline, "a promotion never landed"
            time.sleep(0.001)
            answer = self.manager.lookup(key, ctx)
        if answer is not LookupResult.HIT:
            return
        spec = self.manager.prepare_load([key], ctx)
        assert isinstance(spec, BlockIdsSpec)
        assert torch.equal(self.host[spec.block_ids[0]], content(key)), "loaded another block's bytes"
        self.manager.complete_load([key], ctx)
        self.loaded_ok += 1

    def refused(self, call: Callable[[], object], message: str) -> None:
        """``call`` raises ``ValueError`` matching ``message`` and leaves the primary as it was."""
        before = snapshot(self.primary, KEYS)
        with pytest.raises(ValueError, match=message):
            call()
        assert snapshot(self.primary, KEYS) == before

    @rule(index=st.integers(0, len(KEYS) - 1), success=st.booleans())
    def complete_a_promotion_in_flight(self, index: int, success: bool) -> None:
        key = KEYS[index]
        if self.manager.lookup(key, ctx) is LookupResult.RETRY:
            self.refused(
                lambda: self.manager.complete_store([key], ctx, success=success),
                "is being promoted from a secondary tier by 'kvcontract-tiering'",
            )

    @rule(index=st.integers(0, len(KEYS) - 1), success=st.booleans(), duplicate=st.booleans())
    def complete_a_store_of_another_request_or_twice(self, index: int, success: bool, duplicate: bool) -> None:
        key = KEYS[index]
        if self.manager.lookup(key, ctx) is not LookupResult.MISS:
            return
        owner = ReqContext("owner")
        plan = self.manager.prepare_store([key], owner)
        if plan is None or key not in plan.keys_to_store:
            return
        if duplicate:
            self.refused(lambda: self.manager.complete_store([key, key], owner, success=success), "is named twice")
        else:
            self.refused(lambda: self.manager.complete_store([key], ctx, success=success), "belongs to 'owner'")
        self.manager.complete_store([key], owner, success=False)

    @rule(index=st.integers(0, len(KEYS) - 1))
    def complete_a_load_never_prepared(self, index: int) -> None:
        self.refused(
            lambda: self.manager.complete_load([KEYS[index]], ctx), "complete_load: block .* is not being loaded"
        )

    @rule(fail=st.booleans())
    def switch_write_failures(self, fail: bool) -> None:
        Faults.fail_writes = fail

    @rule(index=st.integers(0, len(KEYS) - 1), truncate=st.booleans())
    def corrupt_file(self, index: int, truncate: bool) -> None:
        self.manager.take_events()
        path = Path(BlockDirectory(self.root, IDENTITY.fingerprint_hex).path_of(KEYS[index]))
        if not path.exists():
            return
        data = bytearray(path.read_bytes())
        if truncate:
            data = data[: len(data) // 2]
        else:
            data[-1] ^= 0xFF
        path.write_bytes(bytes(data))

    @rule()
    def restart(self) -> None:
        self.manager.shutdown()
        self._start()

    @invariant()
    def within_capacity(self) -> None:
        assert self.primary.stats().used <= HOST_BLOCKS
        assert len(self.tier) <= TIER_BLOCKS

    @override
    def teardown(self) -> None:
        Faults.fail_writes = False
        self.manager.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(autouse=True)
def patched_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Route the tier's writes through the fault switch."""
    monkeypatch.setattr(file_tier_module, "write_block", flaky_write_block)


TieringMachine.TestCase.settings = stateful_settings(steps=40, fast_examples=60)
test_tiering_with_faults = TieringMachine.TestCase
