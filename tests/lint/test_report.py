"""Output formats: text, json, SARIF 2.1.0 (validated against its schema), GitHub annotations, statistics."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kvcontract.lint.cli import main
from kvcontract.lint.codes import RULES
from kvcontract.lint.finding import AddOverride, Finding
from kvcontract.lint.report import render, statistics

SCHEMA = Path(__file__).parent / "sarif-2.1.0-rtm.5.trimmed.json"


@pytest.fixture
def findings(tmp_path: Path) -> list[Finding]:
    path = str(tmp_path / "pkg" / "mod.py")
    return [
        Finding(
            path,
            3,
            9,
            "KVC001",
            "method 'run' overrides base.Base.run without @override",
            AddOverride(3, 3, "override", "typing_extensions"),
        ),
        Finding(
            path, 7, 1, "KVC007", "base 'X' of class 'Y' cannot be resolved (module 'x' was not found), 100%: done"
        ),
    ]


def test_text(findings: list[Finding], tmp_path: Path) -> None:
    assert render(findings, "text", str(tmp_path)).splitlines() == [
        "pkg/mod.py:3:9: KVC001 method 'run' overrides base.Base.run without @override",
        "pkg/mod.py:7:1: KVC007 base 'X' of class 'Y' cannot be resolved (module 'x' was not found), 100%: done",
    ]


def test_json(findings: list[Finding], tmp_path: Path) -> None:
    items = json.loads(render(findings, "json", str(tmp_path)))
    assert items[0] == {
        "code": "KVC001",
        "name": "missing-override",
        "message": findings[0].message,
        "path": "pkg/mod.py",
        "line": 3,
        "column": 9,
        "fixable": True,
    }
    assert items[1]["fixable"] is False


def test_sarif_is_valid_against_the_schema(findings: list[Finding], tmp_path: Path) -> None:
    log = json.loads(render(findings, "sarif", str(tmp_path), "9.9"))
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    jsonschema.validate(log, schema, cls=jsonschema.Draft4Validator)
    run = log["runs"][0]
    assert run["tool"]["driver"]["version"] == "9.9"
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == list(RULES)
    result = run["results"][0]
    assert result["ruleId"] == "KVC001" and run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "KVC001"
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": 3, "startColumn": 9}


def test_sarif_schema_rejects_a_broken_log(findings: list[Finding], tmp_path: Path) -> None:
    log = json.loads(render(findings, "sarif", str(tmp_path)))
    del log["runs"][0]["tool"]
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    with pytest.raises(jsonschema.ValidationError, match="'tool' is a required property"):
        jsonschema.validate(log, schema, cls=jsonschema.Draft4Validator)


def test_github_annotations_escape_their_fields(findings: list[Finding], tmp_path: Path) -> None:
    lines = render(findings, "github", str(tmp_path)).splitlines()
    assert lines[0] == (
        "::error file=pkg/mod.py,line=3,col=9,title=KVC001 missing-override::"
        "method 'run' overrides base.Base.run without @override"
    )
    assert lines[1].endswith("(module 'x' was not found), 100%25: done")


def test_statistics(findings: list[Finding]) -> None:
    assert statistics([*findings, findings[0]]).splitlines() == [
        "2\tKVC001\t[*] missing-override",
        "1\tKVC007\tunresolved-base",
    ]


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_cli_formats_and_empty_output(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "clean.py").write_text("class A:\n    pass\n")
    assert main(["--format", fmt, str(tmp_path)]) == 0
    out = capsys.readouterr().out
    if fmt == "json":
        assert json.loads(out) == []
    elif fmt == "sarif":
        assert json.loads(out)["runs"][0]["results"] == []
    else:
        assert out == ""
