"""The conformance kit: every built-in component passes it, and each broken one is caught with its rule named."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import torch

from kvcontract import LookupResult, OffloadingWorker, ReqContext, SecondaryTier, make_offload_key
from kvcontract.managers import CPUOffloadingManager, FilterReusedOffloadingManager
from kvcontract.policies import available_policies, get_policy
from kvcontract.testing import ConformanceError, check_manager, check_policy, check_tier, check_worker, example_identity
from kvcontract.tiers import FileTier
from kvcontract.transfer import TorchOffloadingWorker
from tests.testing import support


@pytest.mark.parametrize("name", available_policies())
def test_every_built_in_policy_passes(name: str) -> None:
    check_policy(get_policy(name))


def test_lru_chooses_the_victims_of_its_order_model() -> None:
    check_policy(get_policy("lru"), order_model=get_policy("lru"))


def test_the_cpu_manager_passes() -> None:
    check_manager(lambda capacity: CPUOffloadingManager(capacity, "arc"))


def _file_tier(root: Path) -> Callable[[torch.Tensor], SecondaryTier]:
    made = iter(range(1_000_000))
    return lambda host: FileTier(
        root / str(next(made)), 16, host, identity=example_identity(int(host.shape[1])), io_threads=2
    )


def test_the_file_tier_passes_and_a_corrupt_file_is_a_miss(tmp_path: Path) -> None:
    check_tier(_file_tier(tmp_path), corrupt=support.corrupt_file_block)


def _torch_worker(caches: Sequence[torch.Tensor], host_blocks: int) -> OffloadingWorker:
    return TorchOffloadingWorker(caches, num_host_blocks=host_blocks)


def test_the_torch_worker_passes() -> None:
    check_worker(_torch_worker)


BROKEN: dict[str, tuple[Callable[[Path], None], str | tuple[str, ...]]] = {
    # Each case names the rule it breaks; where it breaks two, either may be the one hypothesis shrinks to.
    "short evict": (lambda _: check_policy(support.ShortEvict), "evict returns exactly n victims"),
    "non-atomic evict": (lambda _: check_policy(support.NonAtomicEvict), "evict that returns None changes nothing"),
    "takes protected": (lambda _: check_policy(support.TakesProtected), "evict never takes a protected block"),
    "takes pinned": (lambda _: check_policy(support.TakesPinned), "evict never takes a pinned or in-flight block"),
    "duplicate victims": (lambda _: check_policy(support.DuplicateVictims), "evict's victims are distinct"),
    "overfills": (
        lambda _: check_policy(support.Overfills),
        (
            "an insert of a held key, or past capacity, is refused",
            "insert_many of a held key, or past capacity, is refused",
        ),
    ),
    "ignores touch, against an LRU order model": (
        lambda _: check_policy(support.IgnoresTouch, order_model=get_policy("lru")),
        "evict chooses the victims the order model chooses",
    ),
    "SIEVE against an LRU order model": (
        lambda _: check_policy(get_policy("sieve"), order_model=get_policy("lru")),
        "evict chooses the victims the order model chooses",
    ),
    "forgets remove": (lambda _: check_policy(support.ForgetsRemove), "get after remove is None"),
    "half insert_many": (
        lambda _: check_policy(support.HalfInsertMany),
        "a refused insert_many changes nothing (all or nothing)",
    ),
    "manager loses a pin": (
        lambda _: check_manager(lambda c: support.LosesPins(c)),
        "complete_load of a block that is not being loaded is refused",
    ),
    "manager keeps failed stores": (
        lambda _: check_manager(lambda c: support.KeepsFailedStores(c)),
        "lookup never answers HIT for a block that is not readable",
    ),
    "reuse filter over a pin-losing manager": (
        lambda _: check_manager(lambda c: FilterReusedOffloadingManager(support.LosesPins(c), store_threshold=2)),
        "complete_load of a block that is not being loaded is refused",
    ),
    "tier serves another key": (
        lambda root: check_tier(lambda host: support.ServesAnotherKey(_file_tier(root)(host))),
        ("a load brings back exactly the stored bytes", "a block never stored is a miss"),
    ),
    "worker loads the wrong block": (
        lambda _: check_worker(lambda caches, n: support.LoadsWrongBlock(_torch_worker(caches, n), len(caches[0]))),
        "a load brings back exactly the bytes stored",
    ),
}

NEEDS_MORE: dict[str, tuple[Callable[[Path], None], str, str]] = {
    # A component that needs more than its contract gives: the rule of the parameter, in the contract's words.
    "policy copies its touched keys": (
        lambda _: check_policy(support.CopiesTouchedKeys),
        "`keys` is a `Sequence`: len(), indexing and repeated passes, nothing more",
        "CachePolicy.touch given keys as a tuple raised AttributeError: 'tuple' object has no attribute 'copy'",
    ),
    "manager concatenates to its stores": (
        lambda _: check_manager(lambda c: support.ConcatenatesStores(c)),
        "`keys` is a `Sequence`: len(), indexing and repeated passes, nothing more",
        "OffloadingManager.prepare_store given keys as a tuple raised TypeError",
    ),
    "manager counts its loads done": (
        lambda _: check_manager(lambda c: support.CountsLoadsDone(c)),
        "`keys` is an `Iterable`: one pass, nothing more (no len(), no indexing, no second pass)",
        "OffloadingManager.complete_load given keys as a one-pass iterator raised TypeError",
    ),
    "manager reads its stores twice": (
        lambda _: check_manager(lambda c: support.ReadsStoresTwice(c)),
        "`keys` is an `Iterable`: one pass, nothing more (no len(), no indexing, no second pass)",
        "OffloadingManager.complete_store iterated keys a second time",
    ),
    "worker indexes its job ids": (
        lambda _: check_worker(lambda caches, n: support.IndexesJobIds(_torch_worker(caches, n), len(caches[0]))),
        "`job_ids` is a `Collection`: len(), `in` and repeated passes, nothing more (no indexing)",
        "OffloadingWorker.wait given job_ids as a set raised TypeError",
    ),
    "tier sorts its touched keys": (
        lambda root: check_tier(
            lambda host: support.SortsTouchedKeys(
                root / str(time.monotonic_ns()), 16, host, identity=example_identity(int(host.shape[1])), io_threads=2
            )
        ),
        "`keys` is a `Sequence`: len(), indexing and repeated passes, nothing more",
        "SecondaryTier.touch given keys as a tuple raised AttributeError",
    ),
}


@pytest.mark.parametrize("case", sorted(NEEDS_MORE))
def test_a_component_that_needs_more_than_its_contract_is_caught_with_the_parameters_rule(
    case: str, tmp_path: Path
) -> None:
    run, rule, detail = NEEDS_MORE[case]
    with pytest.raises(ConformanceError) as caught:
        run(tmp_path)
    assert caught.value.rule == rule
    assert caught.value.detail.startswith(detail), caught.value.detail
    assert "form=Form." in caught.value.steps, caught.value.steps


def test_the_same_components_pass_when_called_with_lists_only() -> None:
    """Each of them works with lists: only a caller passing what the contract allows exposes it."""
    ctx = ReqContext("r")
    keys = [make_offload_key(bytes([n])) for n in range(3)]
    support.CopiesTouchedKeys(4).touch(keys)
    manager = support.CountsLoadsDone(4)
    assert manager.prepare_store(keys, ctx) is not None
    manager.complete_store(keys, ctx)
    manager.prepare_load(keys, ctx)
    manager.complete_load(keys, ctx)
    assert manager.loads_done == 3
    twice = support.ReadsStoresTwice(4)
    twice.prepare_store(keys, ctx)
    twice.complete_store(keys, ctx)
    assert twice.lookup(keys[2], ctx) is LookupResult.HIT
    assert support.ConcatenatesStores(4).prepare_store(keys, ctx) is not None


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_component_is_caught_with_its_rule_named(case: str, tmp_path: Path) -> None:
    run, rule = BROKEN[case]
    start = time.monotonic()
    with pytest.raises(ConformanceError) as caught:
        run(tmp_path)
    print(f"{case}: caught in {time.monotonic() - start:.2f} s")
    assert caught.value.rule in ((rule,) if isinstance(rule, str) else rule)
    assert "Shrunk call sequence" in str(caught.value) and caught.value.steps.strip()
