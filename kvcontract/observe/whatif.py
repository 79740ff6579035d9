"""The live what-if: the hit ratio other capacities and other policies would reach on the traffic served now.

Shadow caches on sampled keys, not stack distances: only LRU has a stack property, and the
reuse filter, ARC, S3-FIFO, SIEVE and prefix-aware eviction do not, so each what-if figure is
that policy (behind the same admission) served each request's sampled keys in the replay's
order, by a lean :class:`~kvcontract.observe.shadow.ShadowCache` that equals a
:class:`~kvcontract.managers.CPUOffloadingManager` served by the engine driver. One shadow
serves every figure of the same policy and size. Sampling is spatial, as in SHARDS
(Waldspurger et al., FAST'15): a key is sampled when its salted xxh3 hash falls below
``rate * 2**64``, so a sampled key is sampled in every request it appears in, and each shadow
holds ``rate * capacity`` blocks; a sampled block stands for ``1 / rate`` blocks.

Two corrections make a small sample hold up on real prefix traffic:

- **Hot heads.** A block at the head of a large share of requests (a system prompt) carries
  a large share of all hits, so whether the hash happens to sample it would swing every
  figure by that share (on the shipped trace one block, the head of every request, is 4 % of
  all blocks requested). Heads are counted (Misra-Gries, 64 counters); a head seen in at
  least 5 % of requests is *hot*: counted at its true weight, as a hit, and kept out of the
  shadows (its reuse distance is a few requests, which every built-in policy holds unless
  the cache cannot hold one request).
- **A floor on shadow size.** A shadow of a handful of blocks says little, so the rate is
  raised until the smallest shadow holds ``MIN_SHADOW_BLOCKS`` (the report says the rate it
  ran at).

At an effective rate of 1.0 nothing is hashed, nothing is hot, and every figure is exactly a
replay of that capacity or policy. The error beside each figure is its standard error by
random groups: the sampled keys fall into ``_GROUPS`` groups by their hash, each a sample of
the keys, and the spread of the figure between them is the sampling error (between requests
it would be several times too small, since keys recur across requests). The bias of scaling a
cache down is not in it (``tools/bench_whatif.py`` measures both against independent replays).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import xxhash
from typing_extensions import override

from kvcontract.config import KVContractConfig, ReuseAdmissionConfig, WhatIfConfig
from kvcontract.contracts import OffloadKey
from kvcontract.metrics import MetricSample
from kvcontract.observe.shadow import ShadowCache
from kvcontract.observe.window import WINDOW_BUCKETS, RecentCounts
from kvcontract.sim.observer import RequestObserver, WhatIfSummary

__all__ = ["WhatIfFigure", "WhatIfObserver", "WhatIfReport", "whatif_observer"]

SALT = 0x6B7663
"""The hash salt by default ("kvc"): fixed, so the same traffic gives the same sample, and the same figures, every run."""
_FULL = 1 << 64
_digest = xxhash.xxh3_64_intdigest
_GROUPS = 32
"""Sampled keys fall into this many groups by their hash: independent samples, whose spread is the error."""
MIN_SHADOW_BLOCKS = 16
"""The smallest shadow holds at least this many blocks: the rate is raised for small primaries."""
_HEAD_COUNTERS = 64
_HOT_SHARE = 0.05
_HOT_AFTER = 100
"""Heads are judged hot only after this many requests, so the first few do not make every head hot."""


@dataclass(frozen=True, slots=True)
class WhatIfFigure:
    """One what-if hit ratio: over the whole run, over the recent window, and the run's sampling error."""

    run: float
    recent: float
    error: float
    """Standard error of ``run`` from sampling (0.0 at ``sample_rate`` 1.0)."""


@dataclass(frozen=True, slots=True)
class WhatIfReport:
    """Every what-if figure now, beside the current configuration's on the same sample."""

    current: WhatIfFigure
    """The primary's own policy and capacity on the sampled keys: the base the deltas are taken from."""
    capacity: dict[float, WhatIfFigure]
    """Multiple of the primary's capacity to the figure at that capacity."""
    policy: dict[str, WhatIfFigure]
    """Policy name to the figure at the primary's capacity."""
    sample_rate: float
    requests: int
    sampled_blocks: int
    shadow_blocks: int
    """Blocks all shadows may hold together: the observer's memory, in the primary's units."""
    requested_rate: float = 1.0
    """The config's rate; ``sample_rate`` is higher where the smallest shadow needs more blocks."""

    def summary(self) -> WhatIfSummary:
        """The run window's figures as ``simulate --json`` writes them."""
        return WhatIfSummary(
            capacity={f"{multiple:g}": figure.run for multiple, figure in self.capacity.items()},
            policy={name: figure.run for name, figure in self.policy.items()},
            current=self.current.run,
            sample_rate=self.sample_rate,
            requested_rate=self.requested_rate,
            errors={
                "current": self.current.error,
                **{f"capacity {multiple:g}": figure.error for multiple, figure in self.capacity.items()},
                **{f"policy {name}": figure.error for name, figure in self.policy.items()},
            },
        )


@dataclass(eq=False)
class _Shadow:
    """One shadow cache and the sampled blocks it found (unweighted), by key group for the error."""

    cache: ShadowCache
    recent: RecentCounts = field(default_factory=RecentCounts)
    """Its own hits in the recent window, weighted (its blocks count 0: they are the sample's)."""
    found: list[int] = field(default_factory=lambda: [0] * _GROUPS)


@dataclass
class _Sample:
    """What every shadow shares: the sampled blocks (unweighted) by key group, and the hot heads, each a hit."""

    weight: float
    offered: list[int] = field(default_factory=lambda: [0] * _GROUPS)
    hot_heads: int = 0
    recent: RecentCounts = field(default_factory=RecentCounts)
    """The hot heads' hits and every block in the recent window, weighted."""

    def figure(self, shadow: _Shadow, exact: bool) -> WhatIfFigure:
        weight, hot = self.weight, self.hot_heads
        blocks = weight * sum(self.offered) + hot
        run = (weight * sum(shadow.found) + hot) / blocks if blocks else 0.0
        own, _ = shadow.recent.totals()
        shared, recent_blocks = self.recent.totals()
        recent = (own + shared) / recent_blocks if recent_blocks else 0.0
        return WhatIfFigure(run, recent, 0.0 if exact else self._error(shadow, run, blocks))

    def _error(self, shadow: _Shadow, ratio: float, blocks: float) -> float:
        """Standard error of ``ratio`` by random groups: the key groups are independent samples of the keys.

        Hits depend on which keys the hash happens to sample (a key recurs across requests,
        and a hot one carries many hits), so the spread between groups of keys, not between
        requests, measures the sampling error. The hot heads are counted exactly and add none.
        """
        if not blocks:
            return 0.0
        deviations = [found - ratio * offered for found, offered in zip(shadow.found, self.offered)]
        mean = sum(deviations) / _GROUPS
        spread = sum((deviation - mean) ** 2 for deviation in deviations)
        return self.weight * math.sqrt(spread * _GROUPS / (_GROUPS - 1)) / blocks


class _HotHeads:
    """The heads of requests seen in at least ``_HOT_SHARE`` of them: Misra-Gries counters, O(1) a request."""

    def __init__(self) -> None:
        self._counts: dict[OffloadKey, int] = {}
        self._seen = 0

    def is_hot(self, head: OffloadKey) -> bool:
        """Count one request's head; whether that head is hot now."""
        counts = self._counts
        self._seen += 1
        count = counts.get(head)
        if count is not None:
            counts[head] = count = count + 1
        elif len(counts) < _HEAD_COUNTERS:
            counts[head] = count = 1
        else:
            for key in [key for key, value in counts.items() if value == 1]:
                del counts[key]
            for key in counts:
                counts[key] -= 1
            return False
        return self._seen >= _HOT_AFTER and count >= _HOT_SHARE * self._seen


class WhatIfObserver(RequestObserver):
    """Sampled shadows of the primary at other capacities and under other policies, fed each request's keys.

    ``capacity`` and ``policy`` are the primary's, ``admission`` its reuse admission (the
    shadows sit behind the same, its tracker scaled like them); another ``salt`` draws another
    sample of the keys. Thread-safe: one thread observes, any reads the report.
    """

    def __init__(
        self,
        capacity: int,
        policy: str,
        config: WhatIfConfig,
        *,
        admission: ReuseAdmissionConfig | None = None,
        salt: int = SALT,
    ) -> None:
        if not 0 <= salt < _FULL:
            raise ValueError(f"WhatIfObserver: salt must be an int in [0, 2**64) (xxh3's seed), got {salt!r}")
        smallest = capacity * min([1.0, *config.capacities])
        rate = min(1.0, max(config.sample_rate, MIN_SHADOW_BLOCKS / smallest))
        self._exact = rate >= 1.0
        self._threshold = int(rate * _FULL)
        self._weight = 1.0 / rate
        self._rate = rate
        self._requested_rate = config.sample_rate
        self._salt = salt
        self._hot = _HotHeads()
        # One shadow per distinct policy and size: the current setting is often also a figure (lru at 1x).
        shadows: dict[tuple[str, int], _Shadow] = {}

        def shadow(policy_name: str, multiple: float) -> _Shadow:
            blocks = max(1, round(capacity * multiple * rate))
            found = shadows.get((policy_name, blocks))
            if found is None:
                found = shadows[policy_name, blocks] = _Shadow(_cache(blocks, policy_name, rate, admission))
            return found

        self._current = shadow(policy, 1.0)
        self._capacity = {multiple: shadow(policy, multiple) for multiple in config.capacities}
        self._policy = {p.kind: shadow(p.kind, 1.0) for p in config.policies}
        self._shadows = list(shadows.values())
        self._sample = _Sample(self._weight)
        self._bucket = max(1, config.window_requests // WINDOW_BUCKETS)
        self._requests = 0
        self._sampled_blocks = 0
        self._lock = threading.Lock()

    @override
    def observe(self, keys: Sequence[OffloadKey]) -> None:
        """One request's prefix keys, in order, as the primary was asked for them."""
        hot_head = False
        if self._exact or not keys:
            sampled = keys
        else:
            hot_head = self._hot.is_hot(keys[0])
            rest = keys[1:] if hot_head else keys
            digest, salt, threshold = _digest, self._salt, self._threshold
            # A comprehension: 50-60 ns a key, against 80 for map and compress (timeit, 24-key requests).
            sampled = [key for key in rest if digest(key, salt) < threshold]
        with self._lock:
            self._requests += 1
            number = self._requests
            if sampled or hot_head:
                self._count(sampled, hot_head)
            if number % self._bucket == 0:
                self._sample.recent.rotate()
                for shadow in self._shadows:
                    shadow.recent.rotate()

    def _count(self, sampled: Sequence[OffloadKey], hot_head: bool) -> None:
        """Serve one request's ``sampled`` keys to every shadow and count them, after its hot head if it has one."""
        sample, weight = self._sample, self._weight
        self._sampled_blocks += len(sampled) + hot_head
        if hot_head:
            sample.hot_heads += 1
            sample.recent.add(1.0, 1.0)
        if not sampled:
            return
        groups = [0] * len(sampled) if self._exact else [_digest(key, self._salt) % _GROUPS for key in sampled]
        offered = sample.offered
        for group in groups:
            offered[group] += 1
        sample.recent.add(0.0, len(sampled) * weight)
        for shadow in self._shadows:
            found = shadow.cache.serve(sampled)
            if found:
                counts = shadow.found
                for group in groups[:found]:
                    counts[group] += 1
                shadow.recent.add(found * weight, 0.0)

    @override
    def summary(self) -> WhatIfSummary:
        return self.report().summary()

    def report(self) -> WhatIfReport:
        """Every figure now."""
        with self._lock:
            exact, sample = self._exact, self._sample
            return WhatIfReport(
                current=sample.figure(self._current, exact),
                capacity={multiple: sample.figure(s, exact) for multiple, s in self._capacity.items()},
                policy={name: sample.figure(s, exact) for name, s in self._policy.items()},
                sample_rate=self._rate,
                requests=self._requests,
                sampled_blocks=self._sampled_blocks,
                shadow_blocks=sum(s.cache.capacity for s in self._shadows),
                requested_rate=self._requested_rate,
            )

    def source(self) -> Iterator[MetricSample]:
        """The figures as Prometheus gauges, for a :class:`~kvcontract.metrics.MetricsCollector`."""
        report = self.report()
        for multiple, figure in report.capacity.items():
            for window, value in (("run", figure.run), ("recent", figure.recent)):
                labels = {"capacity_multiplier": f"{multiple:g}", "window": window}
                yield MetricSample("whatif_hit_ratio", "gauge", _CAPACITY_HELP, value, labels)
        for name, figure in report.policy.items():
            for window, value in (("run", figure.run), ("recent", figure.recent)):
                yield MetricSample(
                    "whatif_policy_hit_ratio", "gauge", _POLICY_HELP, value, {"policy": name, "window": window}
                )
        yield MetricSample(
            "whatif_sample_rate", "gauge", "Fraction of blocks the what-if shadows see.", report.sample_rate
        )


_CAPACITY_HELP = (
    "Hit ratio the current policy would reach with capacity_multiplier times the host memory (sampled shadow)."
)
_POLICY_HELP = "Hit ratio the named policy would reach with the current host memory (sampled shadow)."


def _cache(blocks: int, policy: str, rate: float, admission: ReuseAdmissionConfig | None) -> ShadowCache:
    """A shadow of ``policy`` over ``blocks``, behind ``admission`` with its tracker scaled by ``rate`` like the blocks."""
    if admission is None:
        return ShadowCache(blocks, policy, rate=rate)
    tracker = max(1, round(admission.max_tracker_size * rate))
    return ShadowCache(blocks, policy, rate=rate, store_threshold=admission.store_threshold, max_tracker_size=tracker)


def whatif_observer(config: KVContractConfig) -> WhatIfObserver | None:
    """The observer ``config.observe.whatif`` asks for beside its primary manager, or ``None`` when it is off."""
    whatif = config.observe.whatif
    if whatif is None:
        return None
    primary = config.primary
    return WhatIfObserver(primary.capacity, primary.policy.kind, whatif, admission=primary.admission)
