"""The public types of kvcontract, pinned with assert_type."""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_type

import kvcontract
from kvcontract import (
    BlockStatus,
    LoadStoreSpec,
    LookupResult,
    ManagerStats,
    OffloadingEvent,
    OffloadKey,
    PrepareStoreOutput,
    TransferResult,
    make_offload_key,
    offload_key_group,
    offload_key_hash,
)
from kvcontract.enforce import CHECK_MODES, CheckMode, checked, checks_enabled, checks_mode, configure
from typecheck.fail._fixtures import GoodManager, ctx

key = make_offload_key(b"block", 3)
assert_type(key, OffloadKey)
assert_type(offload_key_hash(key), bytes)
assert_type(offload_key_group(key), int)

manager = GoodManager()
keys: list[OffloadKey] = [key]
assert_type(manager.lookup(key, ctx), LookupResult)
assert_type(manager.prepare_store(keys, ctx), PrepareStoreOutput | None)
assert_type(manager.take_events(), list[OffloadingEvent])
assert_type(manager.stats(), ManagerStats)
assert_type(manager.stats().hit_ratio, float)
manager.complete_store((k for k in keys), ctx)
manager.complete_load(iter(keys), ctx)


def load_through_contract(contract: kvcontract.OffloadingManager) -> LoadStoreSpec:
    """Through the contract, a load spec is only known as a LoadStoreSpec."""
    return assert_type(contract.prepare_load(keys, ctx), LoadStoreSpec)


assert_type(manager.prepare_load(keys, ctx), kvcontract.BlockIdsSpec)
assert_type(checked(manager, kvcontract.OffloadingManager), GoodManager)
assert_type(checks_enabled(), bool)
assert_type(checks_mode(), CheckMode)
assert_type(CHECK_MODES, tuple[CheckMode, ...])
configure(checks=True, full=True)
configure(full=False)
configure(checks=True)
configure()

assert_type(ctx.get_state(BlockStatus), BlockStatus | None)
assert_type(TransferResult(1, True).transfer_bytes, int)
assert_type(BlockStatus(block_id=0).is_ready, bool)


def keys_of(events: Sequence[OffloadingEvent]) -> list[OffloadKey]:
    """Event keys flattened, as an engine's KV-event publisher reads them."""
    return [k for event in events for k in event.keys]
