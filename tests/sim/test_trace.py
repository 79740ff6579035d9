"""Reading Mooncake-format traces, and the errors a bad line gets."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import pytest

from kvcontract.sim import TraceFormatError, TraceRequest, iter_trace, read_trace
from kvcontract.sim.trace import MAX_HASH_IDS, MAX_LINE_BYTES
from tests.sim.support import TRACE

GOOD = '{"timestamp": 5, "input_length": 1100, "output_length": 20, "hash_ids": [0, 7, 9]}\n'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text(text)
    return path


def test_reads_requests_in_file_order_and_skips_blank_lines(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD + "\n" + '{"hash_ids": []}\n')
    assert read_trace(path) == [TraceRequest((0, 7, 9), 5, 1100, 20), TraceRequest(())]
    assert list(iter_trace(str(path))) == read_trace(path)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object with 'hash_ids', got list"),
        ('{"timestamp": 0}', "'hash_ids' must be a list of integers"),
        ('{"hash_ids": [1, "2"]}', "'hash_ids' must be a list of integers"),
        ('{"hash_ids": [-1]}', "'hash_ids' must be a list of integers"),
        ('{"hash_ids": [18446744073709551616]}', "'hash_ids' must be a list of integers"),
        ('{"hash_ids": [1], "timestamp": 1.5}', "'timestamp' must be a non-negative integer"),
        ('{"hash_ids": [1], "output_length": -3}', "'output_length' must be a non-negative integer"),
    ],
)
def test_a_bad_line_names_the_file_and_the_line(tmp_path: Path, line: str, problem: str) -> None:
    path = write(tmp_path, GOOD + line + "\n")
    with pytest.raises(TraceFormatError, match=problem) as raised:
        read_trace(path)
    assert str(raised.value).startswith(f"{path}:2: ")
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"\xff\xfe{}", "not UTF-8 text \\(byte 0xff at column 1\\)"),
        (b'{"hash_ids": [' + b"1" * 5000 + b"]}", "an integer has more than 4300 digits"),
        (b'{"hash_ids": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested deeper than JSON can be read"),
        (
            b'{"hash_ids": [' + b",".join([b"0"] * (MAX_HASH_IDS + 1)) + b"]}",
            f"at most {MAX_HASH_IDS} of them, got a list of {MAX_HASH_IDS + 1} items",
        ),
        (
            b'{"hash_ids": [1], "timestamp": 18446744073709551616}',
            "'timestamp' must be a non-negative integer below 2\\*\\*64",
        ),
        (b" " * (MAX_LINE_BYTES + 1), f"a line holds at most {MAX_LINE_BYTES} bytes"),
    ],
)
def test_untrusted_lines_are_bounded_and_named(tmp_path: Path, raw: bytes, problem: str) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_bytes(GOOD.encode() + raw + b"\n" + GOOD.encode())
    requests = iter_trace(path)
    assert next(requests) == TraceRequest((0, 7, 9), 5, 1100, 20)
    with pytest.raises(TraceFormatError, match=problem) as raised:
        next(requests)
    assert str(raised.value).startswith(f"{path}:2: ")
    assert len(str(raised.value)) < 200


def test_a_missing_file_raises_os_error_with_its_name(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="none.jsonl"):
        read_trace(tmp_path / "none.jsonl")


def test_the_shipped_trace_reads_as_documented() -> None:
    first = list(islice(iter_trace(TRACE), 300))
    assert len(first) == 300 and first[0].hash_ids[0] == 0
    assert all(request.hash_ids for request in first)
    assert all(a.timestamp <= b.timestamp for a, b in zip(first, first[1:]))
