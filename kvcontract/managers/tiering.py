"""A primary host-memory manager with ordered secondary tiers below it.

Blocks stored in the primary cascade to every tier once readable; a primary miss that a
tier holds is promoted back into a reserved primary block, answering ``RETRY`` until it
lands. A request that waited on a key's promotion and finds it failed (a tier slower than
its ``job_deadline``, a store that broke) computes the key instead of promoting it again,
so a slow tier costs recomputation, never a request that waits for ever; a promoted block
evicted before its request loaded it is promoted again. Completions are polled at every
call, never waited for, except by ``reset_cache`` and ``shutdown``, which drain in-flight
jobs first. An engine with a per-step hook calls
:meth:`~TieringOffloadingManager.end_step` there and keeps stepping while
:meth:`~TieringOffloadingManager.has_pending_work`: tier jobs then land on steps that make
no other call, instead of pinning primary blocks until the next request comes.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Protocol, runtime_checkable

from typing_extensions import override

from kvcontract.contracts import (
    BlockIdsSpec,
    LoadStoreSpec,
    LookupResult,
    ManagerStats,
    OffloadingEvent,
    OffloadingManager,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
    SecondaryTier,
    TierJob,
    TransferResult,
)
from kvcontract.managers.evictions import EvictionListener

__all__ = ["TierStats", "TieringOffloadingManager", "TieringStats"]

_DRAIN_PAUSE_SECONDS = 0.0005
_FAILED_KEPT = 4096
"""Keys whose last promotion failed that the manager remembers, the most recent: state bounded whatever the traffic."""
_NOT_IN_TIER = (LookupResult.MISS, LookupResult.RETRY)
"""Tier answers that make a cascade write the key: a tier still asking (remote tiers) may not hold it."""


@dataclass(slots=True)
class TierStats:
    """Counters of one secondary tier, in blocks and bytes.

    The manager counts in one per tier; :meth:`TieringOffloadingManager.stats` hands out copies
    :meth:`reported_by` the tier (what it counts of its checks, whether its store answers).
    """

    name: str
    hits: int = 0
    promoted: int = 0
    written: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    failed_jobs: int = 0
    lookups: int = 0
    promotion_failures: int = 0
    cascade_failures: int = 0
    skipped_cascades: int = 0
    """Blocks not written to the tier because cascades in flight already pinned their share of the primary."""
    checksum_failures: int = 0
    """Blocks read back that failed the tier's verification, as the tier counts them (0 if it keeps no count)."""
    identity_mismatches: int = 0
    """Values the tier met that another block identity wrote, each a miss (0 if it keeps no count)."""
    reachable: bool = True
    """Whether the tier's store answered at its last contact; ``False``: degraded, every lookup a miss."""
    forged_values: int = 0
    """Values whose integrity MAC did not hold (written without the tier's key, with another, or altered), each a miss."""

    def reported_by(self, tier: SecondaryTier) -> TierStats:
        """A copy with what ``tier`` counts of its own checks (0 for any it does not keep) and whether its store answers:
        the manager's counters and the tier's in one record, as every owner of a tier reports them."""
        counts = tier.stats() if isinstance(tier, _VerifyingTier) else None
        return replace(
            self,
            checksum_failures=getattr(counts, "checksum_failures", 0),
            identity_mismatches=getattr(counts, "identity_mismatches", 0),
            forged_values=getattr(counts, "forged_values", 0),
            reachable=not isinstance(tier, _HealthReporting) or tier.healthy,
        )


@runtime_checkable
class _VerifyingTier(Protocol):
    """A tier that verifies what it reads back and counts what fails (the file and Redis tiers)."""

    def stats(self) -> _VerificationCounts: ...


@runtime_checkable
class _HealthReporting(Protocol):
    """A tier whose store may be out of reach, so that it runs degraded (the remote tiers)."""

    @property
    def healthy(self) -> bool: ...


class _VerificationCounts(Protocol):
    @property
    def checksum_failures(self) -> int: ...


@dataclass(frozen=True, slots=True)
class TieringStats(ManagerStats):
    """The primary's stats, with one entry per secondary tier."""

    tiers: tuple[TierStats, ...] = ()


@dataclass
class _RequestPrefix:
    """Per-request state: keys this request found readable in the current scheduler step.

    Its promotions name them in their ``prepare_store`` batch, so they never evict them.
    Only lookups happen inside a step, so nothing else can have evicted them; ``step``
    (the manager and its step number) tells when the list is stale.
    """

    step: tuple[int, int]
    keys: list[OffloadKey] = field(default_factory=list[OffloadKey])


@dataclass(frozen=True, slots=True)
class _WaitingForRoom:
    """Per-request state: until when the request asks again for primary room to promote into (``None``: not waiting)."""

    deadline: float | None


@dataclass(frozen=True, slots=True)
class _AwaitedPromotions:
    """Per-request state: the keys the request waited on a promotion for. One whose promotion failed since, the
    request computes rather than wait on the tier again."""

    keys: set[OffloadKey] = field(default_factory=set[OffloadKey])


@dataclass
class _TierState:
    tier: SecondaryTier
    counters: TierStats
    queued: list[tuple[OffloadKey, int]] = field(default_factory=list[tuple[OffloadKey, int]])
    promotions: dict[int, Sequence[OffloadKey]] = field(default_factory=dict[int, Sequence[OffloadKey]])
    cascades: dict[int, Sequence[OffloadKey]] = field(default_factory=dict[int, Sequence[OffloadKey]])


class TieringOffloadingManager(OffloadingManager):
    """``primary`` (host memory) in front of ``tiers``, searched in order on a primary miss.

    A request whose promotion finds no free primary block waits up to ``room_wait`` seconds
    for one (its lookups answer ``RETRY``) while other jobs hold primary blocks. Cascades in
    flight pin at most ``cascade_share`` of the primary's capacity: a tier that stops answering
    holds no more than that of host memory until its jobs fail, and the blocks beyond it are
    not written to the tier (``skipped_cascades``).
    """

    def __init__(
        self,
        primary: OffloadingManager,
        tiers: Sequence[SecondaryTier],
        *,
        room_wait: float = 2.0,
        cascade_share: float = 1.0,
    ) -> None:
        if not 0 < cascade_share <= 1:
            raise ValueError(
                f"cascade_share must be a fraction of the primary's capacity in (0, 1], got {cascade_share!r}"
            )
        self._primary = primary
        self._room_wait = room_wait
        capacity = primary.stats().capacity
        self._cascade_room = max(1, int(capacity * cascade_share)) if capacity > 0 else None
        """Primary blocks that cascades in flight may pin together (``None``: a primary of unknown capacity, no bound)."""
        self._cascading: Counter[OffloadKey] = Counter()
        """The primary blocks cascades in flight pin, each with the number of its cascades (one per tier)."""
        self._tiers = [_TierState(tier, TierStats(type(tier).__name__)) for tier in tiers]
        self._promoting: dict[OffloadKey, bool] = {}
        self._failed: OrderedDict[OffloadKey, None] = OrderedDict()
        """Keys whose last promotion failed, the most recent last: a request that waited on one computes it."""
        self._job_ids = itertools.count(1)
        self._own = ReqContext("kvcontract-tiering")
        self._steps = 0
        self._loads: dict[OffloadKey, int] = {}
        """Pins that callers hold through ``prepare_load``: the cascades' own pins are not theirs to release."""
        self._eviction_listeners: list[EvictionListener] = []

    @property
    def primary(self) -> OffloadingManager:
        """The host-memory manager in front."""
        return self._primary

    @property
    def tiers(self) -> list[SecondaryTier]:
        """The secondary tiers, in lookup order."""
        return [state.tier for state in self._tiers]

    def add_eviction_listener(self, listener: EvictionListener) -> None:
        """Call ``listener`` with the keys each promotion evicts from the primary: no caller sees those outputs."""
        self._eviction_listeners.append(listener)

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        self._poll()
        answer = self._primary.lookup(key, req_context)
        if answer is LookupResult.HIT:
            self._prefix(req_context).keys.append(key)
            return answer
        submitted = self._promoting.get(key)
        if submitted is not None:
            if not submitted:
                self._flush()
            self._awaited(req_context).keys.add(key)
            return LookupResult.RETRY
        if answer is LookupResult.HIT_PENDING:
            return answer
        if key in self._failed:
            awaited = req_context.get_state(_AwaitedPromotions)
            if awaited is not None and key in awaited.keys:
                return LookupResult.MISS
        retry = False
        for state in self._tiers:
            tier_answer = state.tier.lookup(key)
            state.counters.lookups += 1
            if tier_answer is LookupResult.HIT:
                answer = self._start_promotion(key, state, self._prefix(req_context), req_context)
                if key in self._promoting:
                    self._awaited(req_context).keys.add(key)
                return answer
            retry = retry or tier_answer is LookupResult.RETRY
        return LookupResult.RETRY if retry else LookupResult.MISS

    @staticmethod
    def _awaited(req_context: ReqContext) -> _AwaitedPromotions:
        awaited = req_context.get_state(_AwaitedPromotions)
        if awaited is None:
            awaited = _AwaitedPromotions()
            req_context.set_state(awaited)
        return awaited

    def _prefix(self, req_context: ReqContext) -> _RequestPrefix:
        step = (id(self), self._steps)
        prefix = req_context.get_state(_RequestPrefix)
        if prefix is None or prefix.step != step:
            prefix = _RequestPrefix(step)
            req_context.set_state(prefix)
        return prefix

    def _start_promotion(
        self, key: OffloadKey, state: _TierState, prefix: _RequestPrefix, req_context: ReqContext
    ) -> LookupResult:
        """Reserve a primary block for ``key``; the blocks the request already found stay.

        A key of the request's prefix that the primary no longer holds (its promotion
        failed earlier in this step) gets a block from ``prepare_store`` too: that block is
        freed again, and the key leaves the prefix. Without room, the request waits
        (:meth:`_room_comes`) rather than computing what the tier holds.
        """
        plan = self._primary.prepare_store([*prefix.keys, key], self._own)
        if plan is not None and plan.evicted_keys:
            for listener in self._eviction_listeners:
                listener(plan.evicted_keys)
        if plan is None or key not in plan.keys_to_store:
            return LookupResult.RETRY if self._room_comes(req_context) else LookupResult.MISS
        reserved = dict(zip(plan.keys_to_store, _block_ids(plan.store_spec)))
        block = reserved.pop(key)
        if reserved:
            self._primary.complete_store(list(reserved), self._own, success=False)
            prefix.keys = [k for k in prefix.keys if k not in reserved]
        prefix.keys.append(key)
        if req_context.get_state(_WaitingForRoom) is not None:
            req_context.set_state(_WaitingForRoom(None))  # room came: a later wait gets a deadline of its own
        state.queued.append((key, block))
        state.counters.hits += 1
        self._promoting[key] = False
        return LookupResult.RETRY

    def _room_comes(self, req_context: ReqContext) -> bool:
        """Whether a request that found no primary block for a promotion should ask again (``RETRY``).

        Primary blocks held by promotions, cascades and callers' loads are freed when those
        jobs end, which takes a few steps: a restarted engine that looks up every waiting
        request at once would otherwise compute what its tier holds for all but the first
        few. The wait ends when nothing is held any more (the request's own prefix does not
        fit: it computes the rest) or after ``room_wait`` seconds.
        """
        if not (self._promoting or self._loads or any(state.cascades for state in self._tiers)):
            return False
        now = time.monotonic()
        waiting = req_context.get_state(_WaitingForRoom)
        deadline = None if waiting is None else waiting.deadline
        if deadline is None:
            deadline = now + self._room_wait
            req_context.set_state(_WaitingForRoom(deadline))
        return now < deadline

    @override
    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> LoadStoreSpec:
        spec = self._primary.prepare_load(keys, req_context)  # first: a refused load changes nothing
        loads = self._loads
        for key in keys:
            loads[key] = loads.get(key, 0) + 1
        self._step()
        return spec

    @override
    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
        self._step()
        self._primary.touch(keys, req_context)
        for state in self._tiers:
            state.tier.touch(keys)

    @override
    def complete_load(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        done = list(keys)
        loads = self._loads
        named: dict[OffloadKey, int] = {}
        for key in done:
            named[key] = count = named.get(key, 0) + 1
            if count > loads.get(key, 0):
                raise ValueError(
                    f"complete_load: block {key!r} is not being loaded (it is named {count} times, "
                    f"pinned by {loads.get(key, 0)} loads of callers; a cascade's pin is released only "
                    "by its tier job); nothing was unpinned"
                )
        self._primary.complete_load(done, req_context)
        for key, count in named.items():
            left = loads.pop(key) - count
            if left:
                loads[key] = left
        self._step()

    @override
    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        self._step()
        return self._primary.prepare_store(keys, req_context)

    @override
    def complete_store(self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool = True) -> None:
        stored = list(keys)
        if self._promoting and not self._promoting.keys().isdisjoint(stored):
            promoted = next(k for k in stored if k in self._promoting)
            raise ValueError(
                f"complete_store: block {promoted!r} is being promoted from a secondary tier by "
                f"{self._own.req_id!r}, which completes it when the tier's job finishes; nothing was completed"
            )
        self._primary.complete_store(stored, req_context, success)
        if success:
            self._cascade(stored)
        self._step()

    def _cascade(self, keys: Sequence[OffloadKey]) -> None:
        """Write ``keys``, readable in the primary since a successful ``complete_store``, to every tier."""
        for state in self._tiers:
            missing = self._within_room(state, [k for k in keys if state.tier.lookup(k) in _NOT_IN_TIER])
            if not missing:
                continue
            spec = self._primary.prepare_load(missing, self._own)
            job = next(self._job_ids)
            try:
                submitted = state.tier.submit_store(TierJob(job, missing, _block_ids(spec)))
            except BaseException:
                self._primary.complete_load(missing, self._own)  # a job that never started pins nothing
                raise
            if submitted:
                state.cascades[job] = missing
                self._cascading.update(missing)
            else:
                state.counters.failed_jobs += 1
                state.counters.cascade_failures += 1
                self._primary.complete_load(missing, self._own)

    def _within_room(self, state: _TierState, keys: list[OffloadKey]) -> list[OffloadKey]:
        """The keys whose cascade stays within the room cascades may pin: blocks already pinned by
        another tier's cascade cost none; the others are counted in ``skipped_cascades``."""
        if self._cascade_room is None:
            return keys
        room = self._cascade_room - len(self._cascading)
        kept: list[OffloadKey] = []
        for key in keys:
            if key in self._cascading or room > 0:
                room -= key not in self._cascading
                kept.append(key)
        state.counters.skipped_cascades += len(keys) - len(kept)
        return kept

    @override
    def on_request_finished(self, req_context: ReqContext) -> None:
        self._step()
        self._primary.on_request_finished(req_context)

    @override
    def take_events(self) -> list[OffloadingEvent]:
        self._step()
        events = self._primary.take_events()
        for state in self._tiers:
            events.extend(state.tier.take_events())
        return events

    @override
    def stats(self) -> TieringStats:
        self._poll()
        primary = self._primary.stats()
        tiers = tuple(state.counters.reported_by(state.tier) for state in self._tiers)
        counters = {f.name: getattr(primary, f.name) for f in fields(ManagerStats)}
        return TieringStats(**counters, tiers=tiers)

    def end_step(self) -> None:
        """The scheduler's step is over: land the tier jobs that finished and submit the step's promotions."""
        self._step()

    def has_pending_work(self) -> bool:
        """Whether tier jobs are still in flight or promotions queued, after landing those that finished.

        While it is true the engine should keep stepping (calling :meth:`end_step`): a cascade
        in flight pins its primary blocks, a promotion holds a reserved one.
        """
        self._poll()
        return any(state.queued or state.promotions or state.cascades for state in self._tiers)

    @override
    def reset_cache(self) -> None:
        """Drain in-flight tier jobs, then clear the primary.

        Persistent tiers keep their blocks: keys are content hashes, so what a tier holds
        stays valid; give a tier a new root to start it empty.
        """
        self._drain()
        self._primary.reset_cache()

    @override
    def shutdown(self) -> None:
        self._drain()
        for state in self._tiers:
            state.tier.shutdown()
        self._primary.shutdown()

    def _step(self) -> None:
        self._steps += 1
        self._poll()
        self._flush()

    def _flush(self) -> None:
        for state in self._tiers:
            if not state.queued:
                continue
            keys = [key for key, _ in state.queued]
            host_ids = [block for _, block in state.queued]
            state.queued.clear()
            job = next(self._job_ids)
            try:
                submitted = state.tier.submit_load(TierJob(job, keys, host_ids))
            except BaseException:
                self._finish_promotion(keys, success=False)  # frees the blocks reserved for it
                raise
            if submitted:
                state.promotions[job] = keys
                self._promoting.update(dict.fromkeys(keys, True))
            else:
                state.counters.failed_jobs += 1
                state.counters.promotion_failures += 1
                self._finish_promotion(keys, success=False)

    def _poll(self) -> None:
        for state in self._tiers:
            for result in state.tier.get_finished():
                self._apply(state, result)

    def _apply(self, state: _TierState, result: TransferResult) -> None:
        if not result.success:
            state.counters.failed_jobs += 1
        promoted = state.promotions.pop(result.job_id, None)
        if promoted is not None:
            state.counters.promotion_failures += not result.success
            if result.success:
                state.counters.promoted += len(promoted)
                state.counters.bytes_read += result.transfer_bytes
            self._finish_promotion(promoted, success=result.success)
            return
        cascaded = state.cascades.pop(result.job_id, None)
        if cascaded is not None:
            self._cascading.subtract(cascaded)
            for key in cascaded:
                if self._cascading[key] <= 0:
                    del self._cascading[key]
            state.counters.cascade_failures += not result.success
            if result.success:
                state.counters.written += len(cascaded)
                state.counters.bytes_written += result.transfer_bytes
            self._primary.complete_load(cascaded, self._own)

    def _finish_promotion(self, keys: Sequence[OffloadKey], *, success: bool) -> None:
        failed = self._failed
        for key in keys:
            self._promoting.pop(key, None)
            if success:
                failed.pop(key, None)
            else:
                failed[key] = None
                failed.move_to_end(key)
        while len(failed) > _FAILED_KEPT:
            failed.popitem(last=False)
        self._primary.complete_store(keys, self._own, success)

    def _drain(self) -> None:
        self._flush()
        while any(state.promotions or state.cascades for state in self._tiers):
            self._poll()
            time.sleep(_DRAIN_PAUSE_SECONDS)


def _block_ids(spec: LoadStoreSpec) -> Sequence[int]:
    if not isinstance(spec, BlockIdsSpec):
        raise TypeError(
            f"TieringOffloadingManager needs a primary whose specs are BlockIdsSpec "
            f"(host block ids), got {type(spec).__name__}"
        )
    return spec.block_ids
