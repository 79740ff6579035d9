"""The live what-if: exact at sample rate 1.0 (each figure a replay), bounded, windowed, and validated."""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcontract.config import BUILTIN_POLICIES, ConfigError, ReuseAdmissionConfig, WhatIfConfig, load_config
from kvcontract.contracts import OffloadingManager
from kvcontract.managers import CPUOffloadingManager, FilterReusedOffloadingManager
from kvcontract.observe import WhatIfObserver, whatif_observer
from kvcontract.observe.whatif import MIN_SHADOW_BLOCKS
from kvcontract.sim import block_key, replay

traces = st.lists(
    st.lists(st.integers(0, 40), min_size=1, max_size=6),  # a key may repeat within a request
    min_size=1,
    max_size=60,
)


def observed(observer: WhatIfObserver, trace: Sequence[Sequence[int]]) -> None:
    for request in trace:
        observer.observe([block_key(hash_id) for hash_id in request])


def replayed(manager: OffloadingManager, trace: Sequence[Sequence[int]]) -> float:
    return replay(manager, [list(request) for request in trace]).hit_ratio


@settings(max_examples=40, deadline=None)
@given(
    trace=traces,
    capacity=st.integers(2, 30),
    multiple=st.sampled_from([0.5, 2.0, 3.0]),
    policy=st.sampled_from(BUILTIN_POLICIES),
    admission=st.none() | st.tuples(st.integers(2, 3), st.integers(1, 50)),
)
def test_at_rate_one_every_figure_is_exactly_a_replay(
    trace: list[list[int]], capacity: int, multiple: float, policy: str, admission: tuple[int, int] | None
) -> None:
    reuse = (
        None if admission is None else ReuseAdmissionConfig(store_threshold=admission[0], max_tracker_size=admission[1])
    )
    config = WhatIfConfig.model_validate({"capacities": [multiple], "policies": [policy], "sample_rate": 1.0})
    observer = WhatIfObserver(capacity, "arc", config, admission=reuse)
    observed(observer, trace)
    report = observer.report()

    def manager(blocks: int, name: str) -> OffloadingManager:
        inner = CPUOffloadingManager(blocks, name)
        if reuse is None:
            return inner
        return FilterReusedOffloadingManager(
            inner, store_threshold=reuse.store_threshold, max_tracker_size=reuse.max_tracker_size
        )

    assert report.capacity[multiple].run == replayed(manager(max(1, round(capacity * multiple)), "arc"), trace)
    assert report.policy[policy].run == replayed(manager(capacity, policy), trace)
    assert report.current.run == replayed(manager(capacity, "arc"), trace)
    assert report.capacity[multiple].error == 0.0 and report.sampled_blocks == sum(map(len, trace))


def test_sampling_is_the_same_every_run_sees_a_fraction_and_reports_an_error() -> None:
    trace = [[(r * 7 + i) % 3000 for i in range(12)] for r in range(2000)]
    config = WhatIfConfig(sample_rate=0.1)
    first, second = WhatIfObserver(1000, "lru", config), WhatIfObserver(1000, "lru", config)
    observed(first, trace)
    observed(second, trace)
    one, other = first.report(), second.report()
    assert one == other, "a fixed salt: the same traffic gives the same figures"
    total = sum(map(len, trace))
    assert 0.05 * total < one.sampled_blocks < 0.15 * total
    assert one.sample_rate == 0.1
    assert one.shadow_blocks == sum(round(1000 * m * 0.1) for m in (0.5, 2, 4)) + 5 * 100, (
        "lru at 1x is one shadow for two figures"
    )
    assert all(0 < figure.error < 0.1 for figure in one.capacity.values())


def test_the_reported_error_covers_the_spread_between_samples_of_the_keys() -> None:
    """Thirty heads, none hot, carry every hit: which keys the hash samples, not which requests, sets the error."""
    trace = [[1_000_000 + r % 30, *range(10 * r, 10 * r + 9)] for r in range(3000)]
    config = WhatIfConfig.model_validate({"capacities": [2.0], "policies": ["lru"], "sample_rate": 0.1})
    runs: list[float] = []
    errors: list[float] = []
    for salt in range(8):
        observer = WhatIfObserver(2000, "lru", config, salt=salt)
        observed(observer, trace)
        figure = observer.report().current
        runs.append(figure.run)
        errors.append(figure.error)
    truth = replayed(CPUOffloadingManager(2000, "lru"), trace)
    assert statistics.pstdev(runs) <= 2 * statistics.mean(errors)
    assert all(abs(run - truth) <= 2 * error for run, error in zip(runs, errors))


def test_a_small_primary_raises_the_rate_until_the_smallest_shadow_holds_its_floor() -> None:
    assert WhatIfObserver(30, "lru", WhatIfConfig(sample_rate=0.01)).report().sample_rate == 1.0
    assert WhatIfObserver(6400, "lru", WhatIfConfig(sample_rate=0.001)).report().sample_rate == MIN_SHADOW_BLOCKS / 3200


def test_a_head_in_every_request_counts_at_its_weight_not_the_sample_s() -> None:
    """One head shared by every request carries a large share of the hits whether or not the hash samples it."""
    trace = [[0, *range(1 + 20 * r, 21 + 20 * r)] for r in range(3000)]
    config = WhatIfConfig.model_validate({"capacities": [2.0], "policies": ["lru"], "sample_rate": 0.01})
    observer = WhatIfObserver(20_000, "lru", config)
    observed(observer, trace)
    assert abs(observer.report().current.run - 1 / 21) < 0.005, "the head hits in every request but the first"


def test_the_recent_window_follows_a_change_of_traffic_that_the_run_averages() -> None:
    config = WhatIfConfig.model_validate(
        {"capacities": [2.0], "policies": ["lru"], "sample_rate": 1.0, "window_requests": 100}
    )
    observer = WhatIfObserver(100, "lru", config)
    repeated = [[1, 2, 3, 4]] * 300
    fresh = [[10_000 + 4 * r + i for i in range(4)] for r in range(300)]
    observed(observer, repeated + fresh)
    figure = observer.report().capacity[2.0]
    assert figure.recent == 0.0 and 0.45 < figure.run < 0.5


@pytest.mark.parametrize(
    ("whatif", "named"),
    [
        ({"capacities": [0]}, "observe.whatif.capacities.0"),
        ({"capacities": [2, 2]}, "observe.whatif.capacities"),
        ({"policies": ["fifo-of-nowhere"]}, "observe.whatif.policies.0.kind"),
        ({"sample_rate": 0}, "observe.whatif.sample_rate"),
        ({"sample_rate": 1.5}, "observe.whatif.sample_rate"),
        ({"window_requests": 0}, "observe.whatif.window_requests"),
        ({"colour": "red"}, "observe.whatif.colour"),
    ],
)
def test_a_bad_whatif_config_is_one_error_naming_the_field(whatif: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(base={"observe": {"whatif": whatif}})
    assert named in str(raised.value)


def test_off_by_default() -> None:
    assert whatif_observer(load_config(base={})) is None


def _config(tmp_path: Path, rate: float) -> Path:
    path = tmp_path / "whatif.yaml"
    path.write_text(
        "kv_layout: tiny\nmanager: {kind: cpu, capacity: 1500}\n"
        f"observe: {{whatif: {{sample_rate: {rate}, window_requests: 200}}}}\n"
    )
    return path


def test_simulate_writes_the_whatif_object_and_a_summary_line(tmp_path: Path) -> None:
    config = _config(tmp_path, 1.0)
    command = [sys.executable, "-m", "kvcontract", "simulate", "--config", str(config), "--requests", "300"]
    figures = json.loads(subprocess.run([*command, "--json"], capture_output=True, text=True, check=True).stdout)
    whatif = figures["whatif"]
    assert set(whatif["capacity"]) == {"0.5", "2", "4"} and set(whatif["policy"]) == set(BUILTIN_POLICIES)
    assert whatif["capacity"]["0.5"] <= whatif["current"] <= whatif["capacity"]["4"]
    table = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert "what-if: 2x host memory" in table and "what-if: policy s3fifo" in table


def test_simulate_serves_the_whatif_gauges(tmp_path: Path) -> None:
    parser = pytest.importorskip(
        "prometheus_client.parser", reason="prometheus-client not installed (extra kvcontract[metrics])"
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "kvcontract",
        "simulate",
        "--config",
        str(_config(tmp_path, 0.5)),
        "--requests",
        "3000",
        "--json",
        "--metrics-port",
        str(port),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        text = _scrape_whatif(f"http://127.0.0.1:{port}/metrics", process)
    finally:
        _, err = process.communicate(timeout=600)  # reads and closes the stderr pipe
    families = {family.name: family for family in parser.text_string_to_metric_families(text)}
    capacity = {
        (s.labels["capacity_multiplier"], s.labels["window"]) for s in families["kvcontract_whatif_hit_ratio"].samples
    }
    assert capacity == {(m, w) for m in ("0.5", "2", "4") for w in ("run", "recent")}
    policies = {s.labels["policy"] for s in families["kvcontract_whatif_policy_hit_ratio"].samples}
    assert policies == set(BUILTIN_POLICIES)
    assert process.returncode == 0, err


def _scrape_whatif(url: str, process: subprocess.Popen[str]) -> str:
    """The first scrape of ``url`` that carries the what-if gauges, while ``process`` runs."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(urllib.error.URLError, ConnectionError):
            with urllib.request.urlopen(url, timeout=5) as response:
                text: str = response.read().decode()
            if "kvcontract_whatif_policy_hit_ratio" in text:
                return text
        time.sleep(0.05)
    raise AssertionError(f"no what-if gauges at {url} while simulate ran (exit {process.poll()})")


@pytest.mark.parametrize("salt", [-1, 1 << 64])
def test_a_salt_outside_xxh3_s_seeds_is_one_error_naming_it(salt: int) -> None:
    with pytest.raises(ValueError, match="salt must be an int in"):
        WhatIfObserver(1000, "lru", WhatIfConfig(), salt=salt)
