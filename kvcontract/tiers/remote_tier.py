"""What every tier on a remote key-value store shares: the keys this process knows, batched lookups, the breaker, job bookkeeping.

The store (Redis, Mooncake) owns capacity and eviction: the tier keeps no index of its own,
only what this process knows (keys known present, keys it is storing), so a key the store
evicted is a miss when it is loaded. A lookup of a key not known queues it for the lookup
thread, which asks the store for every key queued since its last batch in one call; the
lookup answers ``RETRY`` until the answer lands and ``MISS`` after ``lookup_timeout``. Jobs
run on a thread pool (loads before stores), so the scheduler never waits on the network.

A call the store did not answer fails the job it hit and opens a breaker: until a probe
passes again, lookups say ``MISS``, submits return ``False`` and the jobs already queued fail
when their turn comes (``success=False``, no call made), instead of each job waiting out the
timeout; ``shutdown`` fails the queued jobs the same way, so it waits for the calls in flight
only (each bounded by the store's timeout). A job not reported within ``job_deadline`` seconds
is reported failed then (its host blocks zero-filled for a load), counted in ``expired_jobs``
and logged once; whatever its calls do later changes neither the host blocks nor what the
tier knows. A failed load zero-fills all its host blocks; a failed store marks
nothing readable. Each store says how it is opened, probed, asked, written, read and closed,
in the hooks :class:`RemoteTier` leaves abstract.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic

import torch
from typing_extensions import TypeVar, override

from kvcontract.contracts.identity import BlockIdentity
from kvcontract.contracts.keys import OffloadKey
from kvcontract.contracts.request import LookupResult
from kvcontract.contracts.tier import TierJob
from kvcontract.contracts.values import TransferResult
from kvcontract.tiers.base import TierBase
from kvcontract.tiers.integrity import MismatchLog, ValueMac
from kvcontract.tiers.io_pool import BACKGROUND, PriorityThreadPool
from kvcontract.tiers.store_value import BadValueError

__all__ = [
    "PREFIX_FINGERPRINT_DIGITS",
    "DEFAULT_OPTIONS",
    "Fault",
    "LoadOutcome",
    "RemoteTier",
    "RemoteTierOptions",
    "RemoteTierStats",
]

PREFIX_FINGERPRINT_DIGITS = 16
"""Hex digits of the identity's fingerprint in every key name: 64 bits keep identities apart; the value holds all 128."""

_LOOKUP_BATCH = 4096
NEVER = float("inf")
"""The expiry of a key known present in a store whose values do not expire."""


@dataclass(frozen=True, slots=True)
class RemoteTierOptions:
    """How a remote tier runs, whatever its store: one value from the config (or the library user) to the tier.

    ``namespace`` scopes the tier's keys within its identity. ``io_threads`` run the jobs.
    ``lookup_timeout``: seconds a key not known is answered ``RETRY`` before ``MISS``;
    ``lookup_wait``: seconds a lookup waits for the store's answer before saying ``RETRY``
    (0: never waits). ``retry_interval``: seconds between probes of a store that does not
    answer; ``start_degraded``: start even so. Nothing grows with traffic and nothing waits
    unbounded: ``job_deadline`` is the seconds after which a job the store has not finished is
    reported failed (``None``: never); ``known_keys`` the keys known present that the tier
    remembers (least recently used forgotten first, then asked again); ``enable_events``
    whether the tier keeps ``OffloadingEvent``s for :meth:`~RemoteTier.take_events` (off, it
    keeps none: an engine that never takes them, as SGLang, would otherwise hold one per stored block).
    """

    namespace: str | None = None
    io_threads: int = 4
    lookup_timeout: float = 0.1
    lookup_wait: float = 0.0
    retry_interval: float = 1.0
    start_degraded: bool = False
    job_deadline: float | None = None
    known_keys: int = 1 << 16
    enable_events: bool = False

    def __post_init__(self) -> None:
        if self.io_threads < 1:
            raise ValueError(f"io_threads must be at least 1, got {self.io_threads}")
        if not self.lookup_timeout > 0 or not self.retry_interval > 0:
            raise ValueError(
                f"lookup_timeout and retry_interval must be positive seconds, got {self.lookup_timeout} "
                f"and {self.retry_interval}"
            )
        if not self.lookup_wait >= 0:
            raise ValueError(f"lookup_wait must be 0 or more seconds, got {self.lookup_wait}")
        if self.job_deadline is not None and not self.job_deadline > 0:
            raise ValueError(f"job_deadline must be a positive number of seconds or None, got {self.job_deadline}")
        if self.known_keys < 1:
            raise ValueError(f"known_keys must be at least 1, got {self.known_keys}")


DEFAULT_OPTIONS = RemoteTierOptions()
"""No namespace, four I/O threads, lookups answered within 0.1 s, no job deadline, 65,536 known keys, no events."""


@dataclass(slots=True)
class RemoteTierStats:
    """What a remote tier knows: payload bytes moved, lookup answers, value checks, faults.

    The tier counts in one of these under its lock; :meth:`RemoteTier.stats` hands out a copy.
    """

    bytes_written: int = 0
    bytes_read: int = 0
    hits: int = 0
    misses: int = 0
    lookups_sent: int = 0
    lookup_batches: int = 0
    lookup_timeouts: int = 0
    evicted: int = 0
    checksum_failures: int = 0
    rejected_values: int = 0
    identity_mismatches: int = 0
    forged_values: int = 0
    timeouts: int = 0
    connection_errors: int = 0
    reconnects: int = 0
    failed_jobs: int = 0
    refused_jobs: int = 0
    expired_jobs: int = 0


class Fault(enum.Enum):
    """What a failed call says of the store: it timed out, or the connection failed."""

    TIMEOUT = enum.auto()
    CONNECTION = enum.auto()


@dataclass(slots=True)
class LoadOutcome:
    """What a load job found, key by key: values gone, bad or unreachable, and the error that stopped it."""

    gone: list[OffloadKey] = field(default_factory=list[OffloadKey])
    bad: list[OffloadKey] = field(default_factory=list[OffloadKey])
    unreachable: list[OffloadKey] = field(default_factory=list[OffloadKey])
    checksum_failures: int = 0
    mismatches: int = 0
    forged: int = 0
    refused: bool = False
    error: BaseException | None = None


StatsT = TypeVar("StatsT", bound=RemoteTierStats, covariant=True, default=RemoteTierStats)
"""A remote tier's stats: :class:`RemoteTierStats`, or a store's own with counters of its own added."""


class RemoteTier(TierBase, Generic[StatsT]):
    """A secondary tier whose blocks are values of a remote store that many engines share.

    ``host_blocks`` is the host memory that job host block ids index: a 2-D ``torch.uint8``
    CPU tensor ``(num_host_blocks, bytes_per_block)``; the caller keeps a job's host blocks
    reserved until :meth:`get_finished` reports the job. ``identity`` is this engine's block
    identity: the first 16 hex digits of its fingerprint and ``options.namespace`` (optional,
    within the identity) name every key, and all of it is in every value, so a value of another
    identity is a miss. Subclasses set what their hooks need before calling this constructor,
    which opens the store (:meth:`_open`) and, with ``options.start_degraded``, starts without it.
    ``mac`` (from the integrity key the engines that share blocks hold) seals every value;
    a value without it, or sealed with another key, is a miss. ``stats`` is the record the tier
    counts in (a fresh one of the store's own stats type), of which :meth:`stats` hands out copies.
    """

    _loads_expire: bool = True
    """Whether loads are failed at ``job_deadline`` too: only where every byte reaches a host block through :meth:`_copy_into`."""

    def __init__(
        self,
        host_blocks: torch.Tensor,
        *,
        identity: BlockIdentity,
        name: str,
        where: str,
        medium: str,
        mac: ValueMac | None,
        options: RemoteTierOptions,
        stats: StatsT,
    ) -> None:
        super().__init__(
            host_blocks,
            identity=identity,
            mac=mac,
            medium=medium,
            where=where,
            enable_events=options.enable_events,
        )
        self._forged_logged = False
        self._options = options
        namespace = options.namespace
        self._prefix = f"kvc:{identity.fingerprint_hex[:PREFIX_FINGERPRINT_DIGITS]}" + (
            f":{namespace}" if namespace else ""
        )
        self._name = name
        self._log = logging.getLogger(type(self).__module__)
        self._healthy = False
        try:
            self._open()
            self._healthy = True
        except ConnectionError:
            if not options.start_degraded:
                raise
            self._log.warning("%s: %s does not answer; starting degraded", name, where)
        self._answered = threading.Condition(self._lock)
        self._counters = stats
        self._mismatches = MismatchLog(self._log, f"{name} at {where}", identity.fingerprint_hex)
        self._known: OrderedDict[OffloadKey, float] = OrderedDict()
        self._storing: dict[OffloadKey, int] = {}
        self._asking: dict[OffloadKey, float] = {}
        self._absent: dict[OffloadKey, float] = {}
        self._queued: list[OffloadKey] = []
        self._deadlines: dict[int, tuple[float, Sequence[int]]] = {}
        """Jobs in flight: when each is overdue, and the host blocks a load writes (empty for a store)."""
        self._expired: set[int] = set()
        """Jobs failed by their deadline whose calls have not come back yet; changed under ``_copying``."""
        self._copying = threading.Lock()
        """Held while a load copies into host blocks, and while a job expires: no byte lands in an expired job's blocks."""
        self._expiry_logged = False
        self._probing = False
        self._last_probe = -float("inf")
        thread = name.replace(" ", "-")
        self._pool = PriorityThreadPool(options.io_threads, name=thread)
        self._lookup_thread = threading.Thread(target=self._lookup_loop, name=f"{thread}-lookup", daemon=True)
        self._lookup_thread.start()

    @override
    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._where!r}, prefix={self._prefix!r})"

    @property
    def namespace(self) -> str | None:
        """The namespace that scopes this tier's keys within its identity, if one was given."""
        return self._options.namespace

    @property
    def healthy(self) -> bool:
        """Whether the last contact with the store succeeded (else lookups miss and submits refuse)."""
        return self._healthy

    def stats(self) -> StatsT:
        """Counters since the tier started: a copy, which later counting leaves as it is."""
        with self._lock:
            return replace(self._counters)

    @override
    def lookup(self, key: OffloadKey) -> LookupResult:
        """``MISS`` while the breaker is open; else ``HIT`` if known present, ``HIT_PENDING`` while this process stores it, else ask the store.

        A key not known is queued for the lookup thread's next batch and answered ``RETRY``; the
        answer is given at the next lookup, ``MISS`` once ``lookup_timeout`` has passed.
        """
        now = time.monotonic()
        with self._lock:
            answer = self._lookup_locked(key, now)
            if answer is LookupResult.RETRY and self._options.lookup_wait > 0:
                self._answered.wait_for(lambda: key not in self._asking, self._options.lookup_wait)
                answer = self._lookup_locked(key, time.monotonic())
            if answer is LookupResult.HIT:
                self._counters.hits += 1
            elif answer is LookupResult.MISS:
                self._counters.misses += 1
        return answer

    def _lookup_locked(self, key: OffloadKey, now: float) -> LookupResult:
        if not self._healthy or self._closed:
            # A load of a known key would be refused now (submit_load): a miss, not a hit that cannot load.
            self._probe_locked(now)
            return LookupResult.MISS
        expires = self._known.get(key)
        if expires is not None:
            if expires > now:
                self._known.move_to_end(key)
                return LookupResult.HIT
            del self._known[key]
        if key in self._storing:
            return LookupResult.HIT_PENDING
        if self._absent.pop(key, None) is not None:
            return LookupResult.MISS
        asked = self._asking.get(key)
        if asked is not None:
            if now - asked <= self._options.lookup_timeout:
                return LookupResult.RETRY
            del self._asking[key]
            self._counters.lookup_timeouts += 1
            return LookupResult.MISS
        self._asking[key] = now
        self._queued.append(key)
        if len(self._queued) == 1:
            self._answered.notify_all()
        return LookupResult.RETRY

    @override
    def submit_store(self, job: TierJob) -> bool:
        """Start writing the job's keys that are neither known present nor being stored.

        ``False`` (nothing started) once shut down or while the store does not answer.
        """
        self._check_job(job)
        now = time.monotonic()
        with self._lock:
            if not self._accepting(now):
                return False
            self._start_job(job.job_id, ())
            new: dict[OffloadKey, int] = {}
            for key, host_id in zip(job.keys, job.host_block_ids):
                if key in new or key in self._storing or self._known.get(key, 0.0) > now:
                    continue
                new[key] = host_id
                self._storing[key] = job.job_id
                self._absent.pop(key, None)
            if new:
                self._start_store(job.job_id, new)
            else:
                self._finish(job.job_id, True, 0, 0.0)
        return True

    @override
    def submit_load(self, job: TierJob) -> bool:
        """Start reading the job's keys into its host blocks.

        ``False`` (nothing started) once shut down, while the store does not answer, or
        when a key is not known present (:meth:`lookup` would not say ``HIT``).
        """
        self._check_job(job)
        now = time.monotonic()
        with self._lock:
            if not self._accepting(now):
                return False
            if any(self._known.get(key, 0.0) <= now for key in job.keys):
                return False
            self._start_job(job.job_id, job.host_block_ids)
            self._start_load(job.job_id, job.keys, job.host_block_ids)
        return True

    @override
    def get_finished(self) -> list[TransferResult]:
        """Jobs finished since the last call, each once; a job past ``job_deadline`` is reported failed here."""
        with self._lock:
            if self._deadlines:
                self._expire_overdue(time.monotonic())
        return super().get_finished()

    def _expire_overdue(self, now: float) -> None:
        """Fail the jobs past their deadline: zero a load's host blocks, forget a store's claim on its keys. Lock held."""
        overdue = [job_id for job_id, (deadline, _) in self._deadlines.items() if deadline <= now]
        for job_id in overdue:
            _, host_ids = self._deadlines.pop(job_id)
            with self._copying:
                self._expired.add(job_id)
                for host_id in host_ids:
                    self._host[host_id].zero_()
            for key in [key for key, owner in self._storing.items() if owner == job_id]:
                del self._storing[key]
            self._counters.expired_jobs += 1
            self._finish(job_id, False, 0, 0.0)
        if overdue and not self._expiry_logged:
            self._expiry_logged = True
            self._log.warning(
                "%s: job %d not finished within job_deadline (%.3g s): reported failed; %s answers slowly or not at "
                "all. Further ones are counted in expired_jobs",
                self._name,
                overdue[0],
                self._options.job_deadline,
                self._where,
            )

    def _late(self, job_id: int) -> bool:
        """Whether ``job_id`` was already failed by its deadline (its report then changes nothing); forgets it. Lock held."""
        with self._copying:
            if job_id in self._expired:
                self._expired.discard(job_id)
                return True
        return False

    def _copy_into(self, job_id: int, host_id: int, payload: memoryview) -> bool:
        """Copy a checked ``payload`` into host block ``host_id`` unless ``job_id`` has expired; whether it did."""
        with self._copying:
            if job_id in self._expired:
                return False
            memoryview(self._rows[host_id])[:] = payload
        return True

    def _refuses(self, jobs: int = 1) -> bool:
        """Whether ``jobs`` jobs reaching the I/O threads together fail at once, with no call of the store
        (the breaker is open or the tier shuts down); each is counted in ``refused_jobs``."""
        with self._lock:
            if self._healthy and not self._closed:
                return False
            self._counters.refused_jobs += jobs
        return True

    @override
    def _release(self) -> None:
        """Stop the lookup thread and close the client; the queued jobs failed at once, the calls in flight ended within the store's timeout."""
        with self._lock:
            self._answered.notify_all()
        self._lookup_thread.join()
        self._close()

    @abstractmethod
    def _open(self) -> None:
        """Connect to the store; ``ConnectionError`` when it does not answer."""

    @abstractmethod
    def _check(self) -> bool:
        """Whether the store answers: open it if it never was, else ask it once (a probe of the breaker)."""

    @abstractmethod
    def _close(self) -> None:
        """Close the store's client once every job is done."""

    @abstractmethod
    def _exists(self, keys: Sequence[OffloadKey]) -> Sequence[bool]:
        """Ask the store which of ``keys`` it holds, in one batch (an error fails the whole batch)."""

    @abstractmethod
    def _start_store(self, job_id: int, blocks: dict[OffloadKey, int]) -> None:
        """Queue the writing of ``blocks`` (key to host block) on the I/O threads, reported with :meth:`_end_store`. Lock held."""

    @abstractmethod
    def _start_load(self, job_id: int, keys: Sequence[OffloadKey], host_ids: Sequence[int]) -> None:
        """Queue the reading of ``keys`` into ``host_ids`` on the I/O threads, every value checked, reported with :meth:`_end_load`. Lock held."""

    @abstractmethod
    def _classify(self, error: BaseException) -> Fault | None:
        """What ``error`` of a call says of the store; ``None`` for an error that is no fault of the store."""

    def _describe(self, error: BaseException) -> str:
        """``error`` in one line for the log."""
        return f"{type(error).__name__}: {error}"

    def _breaks(self) -> bool:
        """Whether a fault opens the breaker (a store of one server); a cluster fails only the keys of a node that is down."""
        return True

    def _expires(self, now: float) -> float:
        """Until when a key found present at ``now`` is known present."""
        return NEVER

    def _accepting(self, now: float) -> bool:
        """Whether jobs may start; probes the store when it is down. Lock held."""
        if self._closed:
            return False
        if not self._healthy:
            self._probe_locked(now)
            return False
        return True

    def _start_job(self, job_id: int, host_ids: Sequence[int]) -> None:
        """Take ``job_id`` in flight, with its deadline; ``host_ids`` are a load's host blocks (empty for a store). Lock held."""
        self._claim(job_id)
        if self._options.job_deadline is not None and (not host_ids or self._loads_expire):
            self._deadlines[job_id] = (time.monotonic() + self._options.job_deadline, host_ids)

    def _end_store(
        self,
        job_id: int,
        keys: Sequence[OffloadKey],
        started: float,
        *,
        error: BaseException | None,
        stored: bool,
        found: Collection[OffloadKey] = (),
    ) -> None:
        """Report a store job: ``keys`` known present if every value was ``stored``, else the job failed.

        ``found`` are keys whose value the store already held (not written by this job): never
        checked, they are neither known present nor counted as written; a lookup asks the store
        and a load checks whatever value is there.
        """
        seconds = time.perf_counter() - started
        expires = self._expires(time.monotonic())
        with self._lock:
            if self._late(job_id):
                return
            for key in keys:
                if self._storing.get(key) == job_id:
                    del self._storing[key]
            if error is not None:
                self._fault_locked(error, f"store job {job_id}")
            if error is not None or not stored:
                self._finish(job_id, False, 0, seconds)
                return
            written = [key for key in keys if key not in found] if found else keys
            for key in written:
                self._remember(key, expires)
            self._counters.bytes_written += len(written) * self._block_bytes
            if written:
                self._events.record(written, removed=False)
            self._finish(job_id, True, len(written) * self._block_bytes, seconds)

    def _reject(self, outcome: LoadOutcome, key: OffloadKey, error: BadValueError) -> None:
        """Count the value of ``key`` as bad, logging why (a value of another identity once per identity)."""
        if error.identity_mismatch:
            self._mismatches.record(f"the value of key {key.hex()}")
        elif error.forged:
            with self._lock:
                first, self._forged_logged = not self._forged_logged, True
            if first:
                self._log.warning(
                    "%s: value of key %s does not carry this tier's integrity MAC (%s): read as a miss. Someone "
                    "without the key, or with another, writes to %s; further ones are counted in "
                    "kvcontract_forged_values_total",
                    self._name,
                    key.hex(),
                    error,
                    self._where,
                )
        else:
            self._log.warning("%s: value of key %s is bad: %s", self._name, key.hex(), error)
        outcome.bad.append(key)
        outcome.checksum_failures += error.checksum_failed
        outcome.mismatches += error.identity_mismatch
        outcome.forged += error.forged

    def _end_load(
        self, job_id: int, keys: Sequence[OffloadKey], host_ids: Sequence[int], started: float, outcome: LoadOutcome
    ) -> None:
        """Report a load job; any key gone, bad or unreachable fails it, its host blocks then all zero-filled and the keys forgotten."""
        lost = [*outcome.gone, *outcome.bad, *outcome.unreachable]
        success = outcome.error is None and not lost and not outcome.refused
        seconds = time.perf_counter() - started
        with self._lock:
            if self._late(job_id):
                return
            if not success:
                for host_id in host_ids:
                    self._host[host_id].zero_()
            for key in lost:
                self._known.pop(key, None)
            if lost:
                self._events.record(lost, removed=True)
            self._counters.evicted += len(outcome.gone)
            self._counters.checksum_failures += outcome.checksum_failures
            self._counters.rejected_values += (
                len(outcome.bad) - outcome.checksum_failures - outcome.mismatches - outcome.forged
            )
            self._counters.identity_mismatches += outcome.mismatches
            self._counters.forged_values += outcome.forged
            if outcome.error is not None:
                self._fault_locked(outcome.error, f"load job {job_id}")
            transferred = len(keys) * self._block_bytes if success else 0
            self._counters.bytes_read += transferred
            self._finish(job_id, success, transferred, seconds)

    def _lookup_loop(self) -> None:
        """Ask for the keys queued since the last batch with one call of :meth:`_exists`, until shutdown."""
        while True:
            with self._lock:
                self._answered.wait_for(lambda: bool(self._queued) or self._closed)
                if self._closed:
                    return
                batch = self._queued[:_LOOKUP_BATCH]
                del self._queued[:_LOOKUP_BATCH]
                self._counters.lookup_batches += 1
                self._counters.lookups_sent += len(batch)
            self._ask(batch)

    def _ask(self, batch: Sequence[OffloadKey]) -> None:
        present: Sequence[bool] = ()
        error: BaseException | None = None
        try:
            present = self._exists(batch)
        except Exception as exc:
            error = exc
        now = time.monotonic()
        expires = self._expires(now)
        with self._lock:
            if error is not None:
                self._fault_locked(error, "lookup")
            for i, key in enumerate(batch):
                if self._asking.pop(key, None) is None:
                    continue
                if i < len(present) and present[i]:
                    if key not in self._storing:
                        self._remember(key, expires)
                else:
                    self._absent[key] = now
            if len(self._absent) > _LOOKUP_BATCH:
                horizon = now - self._options.lookup_timeout
                self._absent = {k: t for k, t in self._absent.items() if t >= horizon}
            self._answered.notify_all()

    def _remember(self, key: OffloadKey, expires: float) -> None:
        """Know ``key`` present until ``expires``; the least recently used beyond the bound are forgotten. Lock held."""
        self._known[key] = expires
        self._known.move_to_end(key)
        if len(self._known) > self._options.known_keys:
            self._known.popitem(last=False)

    def _fault_locked(self, error: BaseException, what: str) -> None:
        """Count a call that failed; one that says the store did not answer opens the breaker. Lock held."""
        self._log.warning("%s: %s failed: %s", self._name, what, self._describe(error))
        fault = self._classify(error)
        if fault is None:
            return
        if fault is Fault.TIMEOUT:
            self._counters.timeouts += 1
        else:
            self._counters.connection_errors += 1
        if self._breaks():
            self._healthy = False

    def _probe_locked(self, now: float) -> None:
        """Queue a probe (:meth:`_check`) at most every ``retry_interval`` seconds while unhealthy. Lock held."""
        if self._probing or self._closed or now - self._last_probe < self._options.retry_interval:
            return
        self._probing = True
        self._last_probe = now
        self._pool.submit(BACKGROUND, self._probe)

    def _probe(self) -> None:
        ok = False
        try:
            ok = self._check()
        except Exception as exc:
            self._log.info("%s: %s still does not answer: %s", self._name, self._where, self._describe(exc))
        with self._lock:
            self._probing = False
            if ok and not self._healthy:
                self._healthy = True
                self._counters.reconnects += 1

    def _finish(self, job_id: int, success: bool, transfer_bytes: int, seconds: float) -> None:
        """Report a job as finished. Lock held."""
        if not success:
            self._counters.failed_jobs += 1
        self._report(job_id, success, transfer_bytes, seconds)
        self._deadlines.pop(job_id, None)
