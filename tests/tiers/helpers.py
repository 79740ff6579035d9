"""Store and load helpers shared by the tier tests, and a machine of engines of several identities on one storage."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from typing import ClassVar

import torch
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule
from typing_extensions import override

from kvcontract import BlockIdentity, LookupResult, OffloadKey, SecondaryTier, TierJob, TransferResult
from kvcontract.testing import example_identity
from kvcontract.tiers import FileTier
from tests.tiers.conftest import drain, key, pattern, settle


def fill(host: torch.Tensor, host_ids: Sequence[int], seeds: Sequence[int]) -> None:
    """Write content ``seeds[i]`` into host block ``host_ids[i]``."""
    for host_id, seed in zip(host_ids, seeds):
        host[host_id].copy_(pattern(seed, host.shape[1]))


def store(
    tier: FileTier, job_ids: Iterator[int], keys: Sequence[OffloadKey], host_ids: Sequence[int]
) -> TransferResult:
    """Store ``keys`` from ``host_ids`` and wait for the result; the submit must be accepted."""
    job_id = next(job_ids)
    assert tier.submit_store(TierJob(job_id, keys, host_ids))
    return drain(tier, [job_id])[job_id]


def load(
    tier: FileTier, job_ids: Iterator[int], keys: Sequence[OffloadKey], host_ids: Sequence[int]
) -> TransferResult:
    """Load ``keys`` into ``host_ids`` and wait for the result; the submit must be accepted."""
    job_id = next(job_ids)
    assert tier.submit_load(TierJob(job_id, keys, host_ids))
    return drain(tier, [job_id])[job_id]


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

    @rule(engine=st.integers(0, 2), indices=st.lists(st.integers(0, IDENTITY_KEYS - 1), min_size=1, max_size=IDENTITY_HOST_BLOCKS, unique=True))
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

    @rule(engine=st.integers(0, 2), indices=st.lists(st.integers(0, IDENTITY_KEYS - 1), min_size=1, max_size=IDENTITY_HOST_BLOCKS, unique=True))
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
