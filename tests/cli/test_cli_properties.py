"""Generated configs and trace lines, valid and not: the command exits 0 or 2, never with a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.support import run_cli
from tests.profiles import THOROUGH

SMALL = st.integers(1, 4)
ANY_INT = st.one_of(SMALL, st.integers(-3, 0), st.integers(2**20, 2**80), st.just(10**4000))
JUNK = st.one_of(st.text(max_size=8), st.floats(allow_nan=True), st.booleans(), st.none(), st.lists(SMALL, max_size=3))


def sometimes(valid: st.SearchStrategy[object], invalid: st.SearchStrategy[object] = JUNK) -> st.SearchStrategy[object]:
    """Mostly ``valid``, now and then ``invalid``."""
    return st.one_of(valid, valid, valid, invalid)


LAYOUTS = st.one_of(
    st.sampled_from(["tiny", "llama-3.1-8b", "gpt-9"]),
    st.fixed_dictionaries(
        {"preset": st.just("tiny")},
        optional={
            "num_layers": sometimes(SMALL, ANY_INT),
            "num_kv_heads": sometimes(SMALL, ANY_INT),
            "head_dim": sometimes(st.sampled_from([8, 16, 32]), ANY_INT),
            "block_tokens": sometimes(st.sampled_from([4, 8, 16]), ANY_INT),
            "offload_block_tokens": sometimes(st.sampled_from([16, 32]), ANY_INT),
            "dtype": sometimes(st.sampled_from(["float16", "bfloat16", "int8", "float32"]), st.text(max_size=6)),
        },
    ),
)
CAPACITIES = sometimes(
    st.one_of(st.integers(1, 64), st.sampled_from(["64KiB", "1MiB", "2MiB"])),
    st.one_of(ANY_INT, st.sampled_from(["3PiB", "lots", "0B", "1KiB", "100TiB"])),
)
POLICIES = sometimes(
    st.sampled_from(["lru", "arc", "s3fifo", "sieve", "prefix_reuse"]),
    st.sampled_from(["mru", "os:getcwd", ":", "no.such.module:X"]),
)
CPU = st.fixed_dictionaries(
    {"kind": st.just("cpu"), "capacity": CAPACITIES},
    optional={
        "policy": POLICIES,
        "admission": sometimes(st.fixed_dictionaries({"store_threshold": st.integers(1, 3)})),
    },
)
MANAGERS = sometimes(
    st.one_of(
        CPU,
        st.fixed_dictionaries(
            {"kind": st.just("tiering"), "primary": CPU.map(lambda d: {k: v for k, v in d.items() if k != "kind"})}
        ),
    ),
    st.one_of(JUNK, st.fixed_dictionaries({"kind": st.sampled_from(["disk", "cpu"]), "colour": JUNK})),
)
CONFIGS = st.fixed_dictionaries(
    {},
    optional={
        "kv_layout": sometimes(LAYOUTS),
        "manager": MANAGERS,
        "transfer": sometimes(st.fixed_dictionaries({"device": st.sampled_from(["cpu", "auto", "cuda:3", "tpu"])})),
        "runtime_checks": sometimes(st.booleans()),
    },
)

IDS = st.lists(st.one_of(st.integers(0, 50), st.integers(0, 2**64 - 1)), max_size=12)


def line(hash_ids: list[object], timestamp: int = 0) -> bytes:
    return json.dumps({"timestamp": timestamp, "hash_ids": hash_ids}).encode()


GOOD_LINE = st.builds(line, IDS, st.integers(0, 10**6))
BAD_LINE = st.one_of(
    st.binary(max_size=20),
    st.builds(line, st.lists(st.one_of(st.integers(-(2**70), 2**70), JUNK), min_size=1, max_size=4)),
    st.just(b'{"hash_ids": [' + b"9" * 5000 + b"]}"),
    st.just(b"[" * 5000),
    st.just(b'{"hash_ids": [1], "input_length": -4}'),
)
TRACES = st.lists(st.one_of(GOOD_LINE, GOOD_LINE, GOOD_LINE, BAD_LINE), min_size=1, max_size=6).map(b"\n".join)
FORMATS = st.sampled_from(["yaml", "json"])


def no_traceback(status: int, err: str) -> None:
    assert status in (0, 2), err
    assert "Traceback" not in err
    if status == 2:
        assert err.startswith("kvcontract:"), err


@settings(
    max_examples=300 if THOROUGH else 25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(config=CONFIGS, trace=TRACES, file_format=FORMATS)
def test_generated_configs_and_traces_exit_0_or_2_without_a_traceback(
    config: dict[str, object], trace: bytes, file_format: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_path = tmp_path / f"c.{file_format}"
    try:
        text = json.dumps(config)  # JSON is YAML too
    except ValueError:  # an integer too long for Python to print: write the file by hand
        text = '{"kv_layout": {"num_layers": ' + "9" * 5000 + "}}"
    config_path.write_text(text)
    trace_path = tmp_path / "t.jsonl"
    trace_path.write_bytes(trace)
    validate = run_cli(capsys, "config", "validate", str(config_path))
    no_traceback(validate.status, validate.err)
    simulate = run_cli(
        capsys, "simulate", "--config", str(config_path), "--trace", str(trace_path), "--requests", "3", "--json"
    )
    no_traceback(simulate.status, simulate.err)
    if simulate.status == 2:
        assert len(simulate.err.strip().splitlines()) == 1, simulate.err
    else:
        assert json.loads(simulate.out)["requests"] >= 1
    if validate.status == 2 and "invalid config" in validate.err:
        assert simulate.status == 2
