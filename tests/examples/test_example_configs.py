"""The ready-to-copy configs of ``examples/configs`` pass ``kvcontract config validate`` (SGLang's section: its backend's check)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.support import run_cli
from tests.required_parts import skip_unless_required

CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "configs"
WHOLE_CONFIGS = sorted(path for path in CONFIGS.glob("*.yaml") if path.name != "sglang.yaml")


def test_the_folder_holds_a_config_for_each_setup() -> None:
    assert {path.stem for path in CONFIGS.glob("*.yaml")} == {
        "cpu",
        "file-tiering",
        "redis",
        "mooncake",
        "vllm",
        "sglang",
        "hybrid",
    }


@pytest.mark.parametrize("config", WHOLE_CONFIGS, ids=lambda path: path.name)
def test_each_example_config_validates(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # relative tier folders are created where the command runs
    outcome = run_cli(capsys, "config", "validate", str(config))
    assert (outcome.status, outcome.out.strip()) == (0, f"{config}: ok"), outcome.err


def test_the_sglang_section_reads_as_the_backend_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        from kvcontract.integrations.sglang.options import backend_options
    except ImportError as error:
        skip_unless_required("sglang", f"SGLang is not installed ({error})")
    monkeypatch.chdir(tmp_path)
    backend = backend_options({"config_file": str(CONFIGS / "sglang.yaml")}, block_bytes=1 << 20, blocks_per_page=1)
    assert backend.tier.kind == "file" and backend.timeout_seconds == 5
