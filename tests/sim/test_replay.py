"""Replaying requests through a manager: what the report counts, and the inputs it accepts."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import pytest

from kvcontract.managers import CPUOffloadingManager, FilterReusedOffloadingManager
from kvcontract.sim import ReplayReport, TraceRequest, iter_trace, replay
from tests.sim.support import TRACE


def test_a_repeated_request_hits_its_whole_prefix() -> None:
    report = replay(CPUOffloadingManager(8), [[1, 2, 3], [1, 2, 3], [1, 2, 4]])
    assert (report.requests, report.blocks, report.hit_blocks) == (3, 9, 5)
    assert report.hit_ratio == pytest.approx(5 / 9)
    assert report.failed_stores == 0 and report.evictions == 0
    assert report.seconds >= 0 and report.cpu_seconds >= 0
    assert report.us_per_block >= 0 and report.cpu_us_per_block >= 0


def test_a_hit_stops_at_the_first_missing_block() -> None:
    report = replay(CPUOffloadingManager(2), [[1, 2], [3], [1, 2]])
    assert report.hit_blocks == 1
    assert report.evictions == 2


def test_requests_may_be_objects_mappings_or_id_sequences(tmp_path: Path) -> None:
    requests: list[TraceRequest | dict[str, list[int]] | tuple[int, ...]] = [
        TraceRequest((1, 2)),
        {"hash_ids": [1, 2]},
        (1, 2, 3),
    ]
    report = replay(CPUOffloadingManager(8), requests)
    assert report.hit_blocks == 4
    path = tmp_path / "trace.jsonl"
    path.write_text('{"hash_ids": [5, 6]}\n{"hash_ids": [5, 6]}\n')
    assert replay(CPUOffloadingManager(8), path).hit_blocks == 2
    assert replay(CPUOffloadingManager(8), str(path)).hit_blocks == 2


def test_a_request_without_hash_ids_is_rejected() -> None:
    with pytest.raises(TypeError, match="request #1 has no hash ids"):
        replay(CPUOffloadingManager(8), [[1], {"ids": [2]}])


def test_a_store_that_cannot_fit_is_counted_as_failed() -> None:
    report = replay(CPUOffloadingManager(2), [[1, 2, 3], [4]])
    assert report.failed_stores == 3 and report.hit_blocks == 0


def test_empty_requests_count_but_cost_nothing() -> None:
    report = replay(CPUOffloadingManager(2), [[], [1]])
    assert report == ReplayReport(2, 1, 0, 0, 0, report.seconds, report.cpu_seconds)


def test_the_first_requests_of_the_shared_trace() -> None:
    requests = list(islice(iter_trace(TRACE), 300))
    lru = replay(CPUOffloadingManager(400, "lru"), requests)
    assert lru.blocks == sum(len(request.hash_ids) for request in requests)
    assert 0 < lru.hit_ratio < 1 and lru.evictions > 0
    filtered = replay(FilterReusedOffloadingManager(CPUOffloadingManager(400, "prefix_reuse")), requests)
    assert filtered.blocks == lru.blocks and filtered.hit_blocks > 0
