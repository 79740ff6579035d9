"""The shipped Mooncake trace by its name, and gzip traces of any name."""

from __future__ import annotations

import gzip
import tomllib
from pathlib import Path

import pytest

from kvcontract.sim import TraceFormatError, read_trace
from kvcontract.sim.shipped import SHIPPED_TRACES, shipped_trace
from kvcontract.sim.trace import read_block_lists
from tests.sim.support import TRACE

ROOT = Path(__file__).resolve().parents[2]
LINES = '{"hash_ids": [0, 7, 9]}\n{"hash_ids": [0, 7, 11]}\n'


def test_the_shipped_trace_reads_by_name_from_any_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    requests = read_trace("mooncake-conversation")
    assert len(requests) == 12_031
    assert sum(len(request.hash_ids) for request in requests) == 288_500
    assert (TRACE.parent / "NOTICE").read_text().count("Apache License, Version 2.0") == 1


def test_a_file_of_the_name_here_wins_over_the_shipped_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mooncake-conversation").write_text(LINES)
    assert shipped_trace("mooncake-conversation") == Path("mooncake-conversation")
    assert len(read_trace("mooncake-conversation")) == 2


def test_the_package_data_names_every_shipped_trace_and_its_notice() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["kvcontract"]
    shipped = {path.relative_to(ROOT / "kvcontract") for path in TRACE.parent.iterdir()}
    named = {path.relative_to(ROOT / "kvcontract") for glob in data for path in (ROOT / "kvcontract").glob(glob)}
    assert shipped <= named
    assert {shipped_trace(name).name for name in SHIPPED_TRACES} == {TRACE.name}


@pytest.mark.parametrize("name", ["trace.jsonl.gz", "trace.jsonl", "trace"])
def test_a_gzip_trace_reads_as_its_text_whatever_its_name(tmp_path: Path, name: str) -> None:
    plain = tmp_path / "plain.jsonl"
    plain.write_text(LINES)
    packed = tmp_path / name
    packed.write_bytes(gzip.compress(LINES.encode()))
    assert read_trace(packed) == read_trace(plain)


def test_a_gzip_csv_trace_reads_as_its_text(tmp_path: Path) -> None:
    packed = tmp_path / "trace.csv.gz"
    packed.write_bytes(gzip.compress(b"request_id,hash_ids\nr1,0 7 9\n"))
    assert read_block_lists(packed) == [(0, 7, 9)]


def test_a_damaged_gzip_trace_is_a_format_error(tmp_path: Path) -> None:
    packed = tmp_path / "trace.jsonl.gz"
    packed.write_bytes(gzip.compress(LINES.encode() * 200)[:60])
    with pytest.raises(TraceFormatError, match=r"trace\.jsonl\.gz: not a readable gzip file"):
        read_trace(packed)
