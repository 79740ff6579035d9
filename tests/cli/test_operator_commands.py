"""`kvcontract plan`, `kvcontract check` and `simulate --metrics-port`, as an operator runs them."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kvcontract.cli import main
from kvcontract.plan.stack_distance import lru_hit_curve
from tests.cli.support import run_cli

REQUESTS = [[1, 2, 3], [1, 2], [4, 5], [1, 2, 3, 6], [4, 5, 7], [1, 2], [4, 5]]


def _jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text(
        "".join(json.dumps({"request_id": str(n), "hash_ids": ids}) + "\n" for n, ids in enumerate(REQUESTS))
    )
    return path


def test_plan_prints_each_policy_and_the_optimum_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        [
            "plan",
            "--trace",
            str(_jsonl(tmp_path)),
            "--capacities",
            "3,5,7",
            "--processes",
            "1",
            "--json",
            "--target-hit",
            "0.3",
        ]
    )
    document = json.loads(capsys.readouterr().out)
    assert status == 0
    assert document["capacities"] == [3, 5, 7]
    assert set(document["curves"]) == {"lru", "arc", "optimum"}
    assert all(best >= lru for best, lru in zip(document["curves"]["optimum"], document["curves"]["lru"]))
    assert document["smallest_capacity"]["optimum"] == 3


def test_plan_splits_lru_hits_by_tier_with_bytes_read_from_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = ["--capacities", "3,4", "--policies", "lru", "--processes", "1", "--block-bytes", "100"]
    tiers = ["--tiers", "host,file,redis", "--tier-capacity", "file=5,redis=7"]
    status = main(["plan", "--trace", str(_jsonl(tmp_path)), *arguments, *tiers, "--json"])
    document = json.loads(capsys.readouterr().out)
    assert status == 0
    split = document["tiers"]
    assert split["levels"] == ["host", "file", "redis"] and split["tier_bytes"] == {"file": 500, "redis": 700}
    # All levels together hit as LRU does at the largest level (redis, 7 blocks), whatever host holds.
    assert split["total_hit_ratios"] == pytest.approx([lru_hit_curve(REQUESTS).hit_ratio(7)] * 2)
    blocks = document["blocks"]
    assert split["bytes_read"]["file"] == [round(ratio * blocks) * 100 for ratio in split["hit_ratios"]["file"]]
    assert main(["plan", "--trace", str(_jsonl(tmp_path)), *arguments, *tiers]) == 0
    assert "split by tier" in capsys.readouterr().out


def test_plan_reads_a_csv_trace_like_the_jsonl_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv_path = tmp_path / "trace.csv"
    csv_path.write_text(
        "request_id,hash_ids\n" + "".join(f"{n},{' '.join(map(str, ids))}\n" for n, ids in enumerate(REQUESTS))
    )
    main(["plan", "--trace", str(csv_path), "--capacities", "4", "--processes", "1", "--json"])
    from_csv = json.loads(capsys.readouterr().out)
    main(["plan", "--trace", str(_jsonl(tmp_path)), "--capacities", "4", "--processes", "1", "--json"])
    assert json.loads(capsys.readouterr().out)["curves"] == from_csv["curves"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--capacities", "lots"], "--capacities"),
        (["--capacities", "8GiB"], "--block-bytes"),
        (["--target-hit", "0.9"], "no capacity reaches it"),
        (["--policies", "lru,nope"], "unknown nope"),
        (["--sample", "2"], "--sample"),
        (["--tiers", "file,host", "--tier-capacity", "file=4"], "write host first"),
        (["--tiers", "host,tape", "--tier-capacity", "tape=4"], "write host first"),
        (["--tiers", "host,file"], "give the size of file"),
        (["--tiers", "host,file", "--tier-capacity", "redis=4"], "not NAME=SIZE for one of file"),
        (["--tiers", "host,file", "--tier-capacity", "file=1..4"], "is a range"),
        (["--tiers", "host,file", "--tier-capacity", "file=8GiB"], "--block-bytes"),
        (["--tier-capacity", "file=4"], "give --tiers"),
    ],
)
def test_plan_refuses_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    status = main(["plan", "--trace", str(_jsonl(tmp_path)), "--processes", "1", *arguments])
    error = capsys.readouterr().err
    assert status == 2 and message in error and len(error.strip().splitlines()) == 1


def test_plan_refuses_an_empty_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["plan", "--trace", str(empty)]) == 2
    assert "no blocks" in capsys.readouterr().err


def _project(tmp_path: Path, component: str) -> Path:
    package = tmp_path / "brokenpolicy"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text(
        "from collections.abc import Set\n"
        "from typing_extensions import override\n"
        "from kvcontract.policies import LRUPolicy\n\n"
        "class Short(LRUPolicy):\n"
        "    @override\n"
        "    def evict(self, n: int, protected: Set[bytes]):  # noqa: KVC003\n"
        "        victims = super().evict(n, protected)\n"
        "        return victims[:-1] if victims else victims\n"
    )
    project = tmp_path / "pyproject.toml"
    project.write_text(f'[tool.kvcontract]\ncomponents = ["{component}"]\n')
    return project


def test_check_runs_the_kit_on_the_named_components(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    clean = tmp_path / "clean.py"
    clean.write_text("VALUE = 1\n")
    good = main(["check", str(clean), "--project", str(_project(tmp_path, "kvcontract.policies:LRUPolicy"))])
    assert "kvcontract.policies:LRUPolicy: policy conforms" in capsys.readouterr().out and good == 0
    bad = main(["check", str(clean), "--project", str(_project(tmp_path, "brokenpolicy:Short"))])
    out = capsys.readouterr().out
    assert "brokenpolicy:Short: policy breaks: evict returns exactly n victims" in out and bad == 1
    reproducer = out.split("policy breaks:", 1)[1]
    assert "asked 1, got 0" in reproducer and "Shrunk call sequence that reproduces it:" in reproducer, out
    # The shrunk sequence ends in one of the kit's eviction rules; which one depends on the search.
    assert "state.evict_one(" in reproducer or "state.evict(" in reproducer, out


def test_check_names_a_component_it_cannot_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = tmp_path / "clean.py"
    clean.write_text("VALUE = 1\n")
    status = main(["check", str(clean), "--project", str(_project(tmp_path, "no_such_module:Policy"))])
    err = capsys.readouterr().err
    assert status == 2 and "cannot import it" in err and "pip install -e ." in err


NARROWED = (
    "from collections.abc import Sequence\n"
    "from typing_extensions import override\n"
    "from kvcontract import OffloadKey\n"
    "from kvcontract.policies import LRUPolicy\n\n"
    "class Sorting(LRUPolicy):\n"
    "    @override\n"
    "    def touch(self, keys: list[OffloadKey]) -> None:\n"
    "        keys.sort()\n"
    "        super().touch(keys)\n"
)


def test_check_reports_the_lint_findings_of_a_component_that_does_not_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A class refused at creation stops its module's import; the lint still says why, and the other components run."""
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    (tmp_path / "narrowpolicy.py").write_text(NARROWED)
    project = tmp_path / "pyproject.toml"
    project.write_text('[tool.kvcontract]\ncomponents = ["narrowpolicy:Sorting", "kvcontract.policies:LRUPolicy"]\n')
    status = main(["check", str(tmp_path / "narrowpolicy.py"), "--project", str(project)])
    captured = capsys.readouterr()
    assert status == 2
    assert "narrowpolicy.py:8:" in captured.out and "KVC003" in captured.out, captured.out
    assert "kvcontract.policies:LRUPolicy: policy conforms" in captured.out
    [line] = captured.err.splitlines()
    assert line.startswith(
        "kvcontract: error: component narrowpolicy:Sorting: importing narrowpolicy raised ContractViolation"
    )
    assert (
        "Sorting.touch parameter 'keys' is list[OffloadKey] where CachePolicy.touch says Sequence[OffloadKey]" in line
    )


@pytest.mark.parametrize(
    "text", ["", "[project]\nname = 'mine'\n", "[tool.kvcontract]\n", "[tool.kvcontract]\ncomponents = []\n"]
)
def test_check_without_components_says_what_it_looked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    clean = tmp_path / "clean.py"
    clean.write_text("VALUE = 1\n")
    project = tmp_path / "pyproject.toml"
    project.write_text(text)
    status = main(["check", str(clean), "--project", str(project)])
    captured = capsys.readouterr()
    assert (status, captured.out) == (2, "")
    assert captured.err.count("\n") == 1, captured.err
    assert f"{project}: " in captured.err and "[tool.kvcontract]" in captured.err and "components = [" in captured.err


def test_check_stops_at_a_missing_project_before_linting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dirty = tmp_path / "dirty.py"
    dirty.write_text(
        "from kvcontract.policies import LRUPolicy\n\n"
        "class Quiet(LRUPolicy):\n"
        "    def __repr__(self) -> str:\n"
        "        return 'quiet'\n"
    )
    status = main(["check", str(dirty), "--project", str(tmp_path / "missing.toml")])
    captured = capsys.readouterr()
    assert status == 2 and "missing.toml" in captured.err and captured.out == ""


def test_simulate_serves_metrics_that_a_scrape_parses(tmp_path: Path) -> None:
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
        "--requests",
        "100000",
        "--json",
        "--metrics-port",
        str(port),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        text = _scrape(f"http://127.0.0.1:{port}/metrics", process)
    finally:
        process.send_signal(signal.SIGINT)  # scraped while it ran: the rest of the run adds nothing here
        _, err = process.communicate(timeout=600)
    families = {family.name: family for family in parser.text_string_to_metric_families(text)}
    assert families["vllm:kv_offload_cpu_cache_usage_perc"].type == "gauge"
    assert families["vllm:kv_offload_store_bytes"].type == "counter"
    assert families["vllm:kv_offload_store_size"].type == "histogram"
    assert process.returncode == 130 and err.splitlines()[-1].startswith("kvcontract: interrupted; simulating on cpu: ")


def test_simulate_with_metrics_served_completes(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("prometheus_client", reason="prometheus-client not installed (extra kvcontract[metrics])")
    outcome = run_cli(capsys, "simulate", "--requests", "50", "--json", "--metrics-port", "0")
    assert outcome.status == 0, outcome.err
    assert outcome.err.startswith("kvcontract: metrics at http://127.0.0.1:")
    assert json.loads(outcome.out)["requests"] == 50


def _scrape(url: str, process: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                text: str = response.read().decode()
            if "kv_offload_store_bytes" in text:
                return text
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"no metrics at {url} while simulate ran (exit {process.poll()})")


def test_plan_splits_hits_over_a_mooncake_tier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tiers = ["--tiers", "host,mooncake", "--tier-capacity", "mooncake=7"]
    status = main(["plan", "--trace", str(_jsonl(tmp_path)), "--processes", "1", "--policies", "lru", *tiers, "--json"])
    document = json.loads(capsys.readouterr().out)
    assert status == 0
    assert document["tiers"]["levels"] == ["host", "mooncake"] and document["tiers"]["tier_capacities"] == {
        "mooncake": 7
    }


def test_plan_with_a_hybrid_layout_sizes_host_blocks_of_every_groups_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A window of one offload block keeps each request's last block: 8 unique blocks, 7 more keys."""
    config = tmp_path / "hybrid.yaml"
    layout = {"preset": "tiny", "block_tokens": 16, "offload_block_tokens": 64}
    groups = [
        {"kind": "full_attention", "num_layers": 1},
        {"kind": "sliding_window", "num_layers": 1, "window_tokens": 64},
    ]
    config.write_text(json.dumps({"kv_layout": {**layout, "groups": groups}}))
    arguments = ["plan", "--trace", str(_jsonl(tmp_path)), "--capacities", "4,8", "--processes", "1", "--json"]
    assert main([*arguments, "--config", str(config)]) == 0
    hybrid = json.loads(capsys.readouterr().out)
    config.write_text(json.dumps({"kv_layout": layout}))
    assert main([*arguments, "--config", str(config)]) == 0
    full = json.loads(capsys.readouterr().out)
    assert (full["unique_blocks"], full["blocks"]) == (7, 18)
    last_blocks = {request[-1] for request in REQUESTS}
    assert (hybrid["unique_blocks"], hybrid["blocks"]) == (7 + len(last_blocks), 18 + len(REQUESTS))
    assert hybrid["block_bytes"] * 2 == full["block_bytes"]  # a host block holds one group's layer
