"""Helpers shared by the tier tests: keys, block contents, job draining, hang guards; store and load helpers; a
machine of engines of several identities on one storage, and one of a remote tier under faults."""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import ClassVar, Protocol, TypeVar

import pytest
import torch
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule
from typing_extensions import override

from kvcontract import (
    BlockIdentity,
    CachePolicy,
    LookupResult,
    OffloadKey,
    SecondaryTier,
    TierJob,
    TransferResult,
    make_offload_key,
)
from kvcontract.testing import example_identity
from kvcontract.tiers import FileTier, MooncakeTier, RedisTier
from kvcontract.tiers.integrity import ValueMac
from kvcontract.tiers.remote_tier import RemoteTier, RemoteTierOptions, RemoteTierStats
from kvcontract.tiers.store_value import encode_value

T = TypeVar("T")
BLOCK_BYTES = 4096
HOST_BLOCKS = 16
IDENTITY = example_identity(BLOCK_BYTES)
FINGERPRINT = IDENTITY.fingerprint
"""The identity of the tiers over the default host buffer, and what their block files carry."""
WRITE_BLOCK = "kvcontract.tiers.file.tier.write_block"
READ_BLOCK = "kvcontract.tiers.file.tier.read_block"
DELETE_BLOCK = "kvcontract.tiers.file.tier.delete_block"
"""Where the file tier looks up its block I/O functions: the targets of fault injection."""
_DRAIN_LIMIT_S = 60.0
"""Guard against a hang only: jobs finish in milliseconds."""
HANG_LIMIT_S = 10.0
"""How long a call that must not hang may take before the test fails (it takes milliseconds)."""

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="giving a directory to another user or making a device node needs root"
)


class MakeTier(Protocol):
    """Builds a file tier that records events; unset arguments default to the test's root and host buffer."""

    def __call__(
        self,
        capacity: int = 8,
        *,
        root: Path | None = None,
        host_blocks: torch.Tensor | None = None,
        policy: str | CachePolicy = "lru",
        io_threads: int = 4,
        enable_events: bool = True,
        identity: BlockIdentity | None = None,
        integrity_key: bytes | None = None,
    ) -> FileTier: ...


def key(i: int) -> OffloadKey:
    """The ``i``-th test key."""
    return make_offload_key(i.to_bytes(8, "big") * 4)


def pattern(seed: int, nbytes: int = BLOCK_BYTES) -> torch.Tensor:
    """Deterministic random bytes for block content number ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=generator)


def settle(tier: SecondaryTier, key_: OffloadKey) -> LookupResult:
    """Look ``key_`` up until the answer is no longer ``RETRY`` (a remote tier's lookup batch landed)."""
    deadline = time.monotonic() + _DRAIN_LIMIT_S
    while True:
        answer = tier.lookup(key_)
        if answer is not LookupResult.RETRY:
            return answer
        assert time.monotonic() < deadline, "a lookup stayed RETRY"
        time.sleep(0.0005)


def drain(tier: SecondaryTier, job_ids: Collection[int]) -> dict[int, TransferResult]:
    """Poll ``tier`` until every job of ``job_ids`` is reported; each must be reported once."""
    results: dict[int, TransferResult] = {}
    deadline = time.monotonic() + _DRAIN_LIMIT_S
    while len(results) < len(job_ids):
        for result in tier.get_finished():
            assert result.job_id in job_ids, f"unexpected job {result.job_id}"
            assert result.job_id not in results, f"job {result.job_id} reported twice"
            results[result.job_id] = result
        assert time.monotonic() < deadline, f"jobs {set(job_ids) - set(results)} never finished"
        time.sleep(0.001)
    return results


def finishes(call: Callable[[], T], limit_s: float = HANG_LIMIT_S) -> T:
    """The result of ``call``, run on a thread; fails the test, rather than hanging it, past ``limit_s``."""
    outcome: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"{call} still runs after {limit_s} s: it hangs"
    if errors:
        raise errors[0]
    return outcome[0]


class Gate:
    """Holds the threads that call a wrapped function until opened; counts who entered."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self.entered = threading.Semaphore(0)

    def wrap(self, fn: Callable[..., None]) -> Callable[..., None]:
        """``fn``, but waiting for :meth:`open` first."""

        def gated(*args: object, **kwargs: object) -> None:
            self.entered.release()
            assert self._open.wait(_DRAIN_LIMIT_S), "gate never opened"
            fn(*args, **kwargs)

        return gated

    def wait_entered(self) -> None:
        """Block until one more thread has reached the gate."""
        assert self.entered.acquire(timeout=_DRAIN_LIMIT_S), "no thread reached the gate"

    def open(self) -> None:
        """Let every waiting and later caller through."""
        self._open.set()


def fill(host: torch.Tensor, host_ids: Sequence[int], seeds: Sequence[int]) -> None:
    """Write content ``seeds[i]`` into host block ``host_ids[i]``."""
    for host_id, seed in zip(host_ids, seeds):
        host[host_id].copy_(pattern(seed, host.shape[1]))


def store(
    tier: SecondaryTier, job_ids: Iterator[int], keys: Sequence[OffloadKey], host_ids: Sequence[int]
) -> TransferResult:
    """Store ``keys`` from ``host_ids`` and wait for the result; the submit must be accepted."""
    job_id = next(job_ids)
    assert tier.submit_store(TierJob(job_id, keys, host_ids))
    return drain(tier, [job_id])[job_id]


def load(
    tier: SecondaryTier, job_ids: Iterator[int], keys: Sequence[OffloadKey], host_ids: Sequence[int]
) -> TransferResult:
    """Load ``keys`` into ``host_ids`` and wait for the result; the submit must be accepted."""
    job_id = next(job_ids)
    assert tier.submit_load(TierJob(job_id, keys, host_ids))
    return drain(tier, [job_id])[job_id]


def store_all(tier: SecondaryTier, host: torch.Tensor, seed: int) -> None:
    """Store every block of ``host`` (content ``seed + row``) under keys ``0..rows-1`` in one job; it must succeed."""
    rows = int(host.shape[0])
    fill(host, range(rows), range(seed, seed + rows))
    assert tier.submit_store(TierJob(1, [key(i) for i in range(rows)], range(rows)))
    assert drain(tier, [1])[1].success


def loads_exactly(tier: SecondaryTier, host: torch.Tensor, seed: int) -> bool:
    """Whether keys ``0..rows-1`` are all hits and load back into ``host`` as :func:`store_all` stored them with ``seed``."""
    rows = int(host.shape[0])
    assert all(settle(tier, key(i)) is LookupResult.HIT for i in range(rows))
    host.fill_(0xEE)
    assert tier.submit_load(TierJob(2, [key(i) for i in range(rows)], range(rows)))
    return drain(tier, [2])[2].success and all(
        torch.equal(host[row], pattern(seed + row, int(host.shape[1]))) for row in range(rows)
    )


def engines_keep_their_own(
    engine_tier: Callable[[str], tuple[RedisTier | MooncakeTier, torch.Tensor]], first_name: str, second_name: str
) -> None:
    """Two engines of other identities on one shared store: the second finds none of the first's
    blocks, and after a restart of both each loads exactly its own, with no value taken for a miss."""
    first, first_host = engine_tier(first_name)
    store_all(first, first_host, seed=100)
    first.shutdown()
    other, other_host = engine_tier(second_name)
    keys = int(other_host.shape[0])
    assert [settle(other, key(i)) for i in range(keys)] == [LookupResult.MISS] * keys
    store_all(other, other_host, seed=200)
    other.shutdown()
    first, first_host = engine_tier(first_name)
    other, other_host = engine_tier(second_name)
    try:
        assert loads_exactly(first, first_host, seed=100) and loads_exactly(other, other_host, seed=200)
        assert first.stats().identity_mismatches == other.stats().identity_mismatches == 0
    finally:
        first.shutdown()
        other.shutdown()


IDENTITY_BYTES = 256
IDENTITY_HOST_BLOCKS = 4
IDENTITY_KEYS = 6


def engine_identities(namespace: str) -> list[BlockIdentity]:
    """Three engines whose blocks have the same size but must never mix: another dtype, another model's rank."""
    first = example_identity(IDENTITY_BYTES, namespace=namespace)
    return [
        first,
        dataclasses.replace(first, dtype="float16"),
        dataclasses.replace(first, model="other/model", tp_size=2, tp_rank=1),
    ]


class SharedTierMachine(RuleBasedStateMachine):
    """Engines of several identities on one storage: stores, loads and restarts drawn at random.

    Every stored block's content is unique (a new seed per store), so a load that returned a
    block another identity wrote, or an older one, would differ from the model's bytes.
    Subclasses say with :meth:`make_tier` how one engine's tier is built on the shared storage.
    """

    namespaces: ClassVar[Iterator[int]] = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.identities = engine_identities(f"example{next(self.namespaces)}")
        self.hosts = [torch.zeros((IDENTITY_HOST_BLOCKS, IDENTITY_BYTES), dtype=torch.uint8) for _ in self.identities]
        self.tiers = [self.make_tier(identity, host) for identity, host in zip(self.identities, self.hosts)]
        self.stored: dict[tuple[int, int], int] = {}
        self.seeds = itertools.count(1)
        self.jobs = itertools.count(1)
        self.exact_loads = 0

    def make_tier(self, identity: BlockIdentity, host: torch.Tensor) -> SecondaryTier:
        """One engine's tier of ``identity`` over ``host`` on the storage the engines share."""
        raise NotImplementedError

    def _run(self, engine: int, job: TierJob, store: bool) -> TransferResult:
        tier = self.tiers[engine]
        started = tier.submit_store(job) if store else tier.submit_load(job)
        if not started:
            return TransferResult(job.job_id, False)
        return drain(tier, [job.job_id])[job.job_id]

    @rule(
        engine=st.integers(0, 2),
        indices=st.lists(st.integers(0, IDENTITY_KEYS - 1), min_size=1, max_size=IDENTITY_HOST_BLOCKS, unique=True),
    )
    def store(self, engine: int, indices: list[int]) -> None:
        tier = self.tiers[engine]
        new = [i for i in indices if settle(tier, key(i)) is LookupResult.MISS]
        if not new:
            return
        seeds = [next(self.seeds) for _ in new]
        fill(self.hosts[engine], range(len(new)), seeds)
        result = self._run(engine, TierJob(next(self.jobs), [key(i) for i in new], range(len(new))), store=True)
        if result.success:
            for i, seed in zip(new, seeds):
                self.stored[(engine, i)] = seed

    @rule(
        engine=st.integers(0, 2),
        indices=st.lists(st.integers(0, IDENTITY_KEYS - 1), min_size=1, max_size=IDENTITY_HOST_BLOCKS, unique=True),
    )
    def load(self, engine: int, indices: list[int]) -> None:
        tier = self.tiers[engine]
        for i in indices:
            if settle(tier, key(i)) is not LookupResult.HIT:
                continue
            assert (engine, i) in self.stored, f"engine {engine} sees key {i}, which only another identity stored"
            host = self.hosts[engine]
            host[0].fill_(0xEE)
            if self._run(engine, TierJob(next(self.jobs), [key(i)], [0]), store=False).success:
                assert torch.equal(host[0], pattern(self.stored[(engine, i)], IDENTITY_BYTES)), (
                    f"engine {engine} loaded bytes of key {i} that it did not store"
                )
                self.exact_loads += 1

    @rule(engine=st.integers(0, 2))
    def restart(self, engine: int) -> None:
        self.tiers[engine].shutdown()
        self.tiers[engine] = self.make_tier(self.identities[engine], self.hosts[engine])

    @override
    def teardown(self) -> None:
        for tier in self.tiers:
            tier.shutdown()


REMOTE_BYTES = 256
REMOTE_IDENTITY = example_identity(REMOTE_BYTES)
REMOTE_KEYS = 8
REMOTE_HOST_BLOCKS = 4
_RECOVER_LIMIT_S = 30.0
"""Guard against a hang only: the tiers probe every 20-50 ms and a Mooncake client re-mounts within seconds."""

remote_key_sets = st.lists(st.integers(0, REMOTE_KEYS - 1), min_size=1, max_size=REMOTE_HOST_BLOCKS, unique=True)
damages = st.sampled_from(["garbage", "short", "flipped", "other-key", "fingerprint"])


def remote_content(i: int) -> torch.Tensor:
    """What key ``i`` always holds in :class:`RemoteTierMachine` (keys are content hashes)."""
    return pattern(i, REMOTE_BYTES)


EVENTS_ON = RemoteTierOptions(enable_events=True)
"""The tests' remote tiers keep events, so that they can check them."""
INTEGRITY_KEY = bytes(range(32))
"""The integrity key the tests' engines share."""
STRANGERS = ["no key", "another key"]
"""Writers without the engines' integrity key: none at all, or another one."""


def stranger_value(tier: RemoteTier[RemoteTierStats], k: OffloadKey, stranger: str) -> bytes:
    """A well-formed value of ``tier``'s identity under ``k`` (a block of the tests' ``BLOCK_BYTES``, pattern 66) that a
    writer of :data:`STRANGERS` made."""
    return encode_value(
        k,
        tier.identity.fingerprint,
        memoryview(pattern(66).numpy().tobytes()),
        None if stranger == "no key" else ValueMac(bytes(range(100, 132))),
    )


def share_sealed(writer: RemoteTier[RemoteTierStats], reader: RemoteTier[RemoteTierStats], host: torch.Tensor) -> None:
    """``writer`` stores two blocks and ``reader`` (another tier holding the same key) loads them back exactly."""
    jobs = itertools.count(1)
    fill(host, [0, 1], [3, 4])
    assert store(writer, jobs, [key(1), key(2)], [0, 1]).success
    assert settle(reader, key(1)) is LookupResult.HIT and settle(reader, key(2)) is LookupResult.HIT
    assert load(reader, jobs, [key(2), key(1)], [5, 6]).success
    assert torch.equal(host[5], pattern(4, host.shape[1])) and torch.equal(host[6], pattern(3, host.shape[1]))


def damaged_value(i: int, damage: str) -> bytes:
    """A value under key ``i`` that is not its block: garbage, one byte short or flipped, another key's or identity's."""
    good = encode_value(key(i), REMOTE_IDENTITY.fingerprint, memoryview(remote_content(i).numpy().tobytes()))
    other = memoryview(remote_content(i + 1).numpy().tobytes())
    values = {
        "garbage": b"garbage",
        "short": good[:-1],
        "flipped": good[:-1] + bytes([good[-1] ^ 0xFF]),
        "other-key": encode_value(key(i + 1), REMOTE_IDENTITY.fingerprint, other),
        "fingerprint": encode_value(key(i), example_identity(REMOTE_BYTES, model="other").fingerprint, other),
    }
    return values[damage]


class RemoteTierMachine(RuleBasedStateMachine):
    """One remote tier in a fresh namespace per example: random stores, loads, lookups and damaged values.

    The model is what a block must hold: key ``i`` always stores :func:`remote_content` ``(i)``.
    Whatever the store does, a successful load gives exactly those bytes, a failed load leaves
    zeros, a key never written is never a hit, and the tier recovers by itself. Subclasses say
    how the tier is built (:meth:`make_tier`) and how a value is written behind its back
    (:meth:`write_value`), and add the store's own faults as rules.
    """

    namespaces: ClassVar[Iterator[int]] = itertools.count()
    stores_fail_while_healthy: ClassVar[bool] = False
    """Whether a store may still fail once the tier is healthy again (a Mooncake client re-mounting its segment)."""

    def __init__(self) -> None:
        super().__init__()
        self.host = torch.zeros((REMOTE_HOST_BLOCKS, REMOTE_BYTES), dtype=torch.uint8)
        self.tier = self.make_tier(self.host, f"machine{next(self.namespaces)}")
        self.jobs = itertools.count(1)
        self.ever_written: set[int] = set()

    def make_tier(self, host: torch.Tensor, namespace: str) -> RemoteTier[RemoteTierStats]:
        """The tier under test over ``host``, of :data:`REMOTE_IDENTITY`, its keys scoped by ``namespace``."""
        raise NotImplementedError

    def write_value(self, i: int, value: bytes) -> bool:
        """Write ``value`` under key ``i`` behind the tier's back; whether the store took it."""
        raise NotImplementedError

    @rule(keys=remote_key_sets)
    def store_blocks(self, keys: list[int]) -> None:
        for row, i in enumerate(keys):
            self.host[row].copy_(remote_content(i))
        job = next(self.jobs)
        if not self.tier.submit_store(TierJob(job, [key(i) for i in keys], list(range(len(keys))))):
            return
        self.ever_written.update(keys)
        drain(self.tier, [job])

    @rule(keys=remote_key_sets)
    def load(self, keys: list[int]) -> None:
        answers = [settle(self.tier, key(i)) for i in keys]
        if any(answer is not LookupResult.HIT for answer in answers):
            return
        self.host.fill_(0xAA)
        job = next(self.jobs)
        if not self.tier.submit_load(TierJob(job, [key(i) for i in keys], list(range(len(keys))))):
            return
        self.assert_loaded(drain(self.tier, [job])[job], keys, range(len(keys)))

    @rule(
        keys=st.lists(st.integers(0, REMOTE_KEYS - 1), min_size=1, max_size=REMOTE_HOST_BLOCKS),
        cuts=st.sets(st.integers(1, REMOTE_HOST_BLOCKS - 1)),
    )
    def load_together(self, keys: list[int], cuts: set[int]) -> None:
        """Load jobs submitted back to back (a tier may merge them), keys repeated within and across jobs."""
        if any(settle(self.tier, key(i)) is not LookupResult.HIT for i in set(keys)):
            return
        self.host.fill_(0xAA)
        bounds = [0, *sorted(cut for cut in cuts if cut < len(keys)), len(keys)]
        submitted: dict[int, range] = {}
        for start, end in itertools.pairwise(bounds):
            job = next(self.jobs)
            if self.tier.submit_load(TierJob(job, [key(i) for i in keys[start:end]], list(range(start, end)))):
                submitted[job] = range(start, end)
        results = drain(self.tier, list(submitted))
        for job, rows in submitted.items():
            self.assert_loaded(results[job], keys, rows)

    def assert_loaded(self, result: TransferResult, keys: Sequence[int], rows: Iterable[int]) -> None:
        """Host block ``row`` holds key ``keys[row]``'s content if ``result`` succeeded, else zeros."""
        for row in rows:
            if result.success:
                assert torch.equal(self.host[row], remote_content(keys[row])), f"key {keys[row]} loaded other bytes"
            else:
                assert not self.host[row].any(), "a failed load leaves zeros"

    @rule(i=st.integers(0, REMOTE_KEYS - 1))
    def lookup(self, i: int) -> None:
        if settle(self.tier, key(i)) is LookupResult.HIT:
            assert i in self.ever_written, f"nothing was ever written under key {i}, yet it is a hit"

    @rule(i=st.integers(0, REMOTE_KEYS - 1), damage=damages)
    def overwrite(self, i: int, damage: str) -> None:
        if self.write_value(i, damaged_value(i, damage)):
            self.ever_written.add(i)

    @rule()
    def recover(self) -> None:
        """After any fault the tier comes back by itself and stores and loads exactly again."""
        deadline = time.monotonic() + _RECOVER_LIMIT_S
        fresh = REMOTE_KEYS + next(self.jobs)
        while True:
            while not self.tier.healthy:
                self.tier.lookup(key(REMOTE_KEYS))
                assert time.monotonic() < deadline, "the tier never recovered"
                time.sleep(0.005)
            self.host[0].copy_(remote_content(fresh))
            job = next(self.jobs)
            stored = self.tier.submit_store(TierJob(job, [key(fresh)], [0])) and drain(self.tier, [job])[job].success
            if stored:
                break
            assert self.stores_fail_while_healthy, "a healthy tier failed to store"
            assert time.monotonic() < deadline, "the tier never stored again"
            time.sleep(0.05)
        self.host[0].zero_()
        job = next(self.jobs)
        assert self.tier.submit_load(TierJob(job, [key(fresh)], [0]))
        assert drain(self.tier, [job])[job].success
        assert torch.equal(self.host[0], remote_content(fresh))

    @override
    def teardown(self) -> None:
        self.tier.shutdown()


REPORT_LIMIT_S = 30.0
"""Guard against a hang only: how long :func:`reports_of` waits for the last report."""


def reports_of(tier: SecondaryTier, job_ids: set[int]) -> tuple[dict[int, TransferResult], float]:
    """Every report of ``job_ids`` (each must come once) and the seconds until the last came."""
    started = time.monotonic()
    reports: dict[int, TransferResult] = {}
    while set(reports) != job_ids:
        for result in tier.get_finished():
            assert result.job_id not in reports, f"job {result.job_id} was reported twice"
            reports[result.job_id] = result
        assert time.monotonic() - started < REPORT_LIMIT_S, f"jobs {job_ids - set(reports)} were never reported"
        time.sleep(0.005)
    return reports, time.monotonic() - started
