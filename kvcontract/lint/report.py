"""Output formats: text, json, sarif (2.1.0) and GitHub annotations, plus ``--statistics``."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from kvcontract.lint.codes import RULES
from kvcontract.lint.finding import Finding

__all__ = ["FORMATS", "Format", "render", "statistics"]

Format = Literal["text", "json", "sarif", "github"]
FORMATS: tuple[Format, ...] = ("text", "json", "sarif", "github")

TOOL_NAME = "kvcontract-lint"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def display_path(path: str, base: str) -> str:
    """``path`` relative to ``base`` when it is inside it, with forward slashes."""
    rel = os.path.relpath(path, base)
    shown = path if rel.startswith("..") else rel
    return shown.replace(os.sep, "/")


def _text(findings: Sequence[Finding], base: str) -> str:
    return "".join(f"{display_path(f.path, base)}:{f.line}:{f.col}: {f.code} {f.message}\n" for f in findings)


def _json(findings: Sequence[Finding], base: str) -> str:
    items = [
        {
            "code": f.code,
            "name": f.name,
            "message": f.message,
            "path": display_path(f.path, base),
            "line": f.line,
            "column": f.col,
            "fixable": f.fix is not None,
        }
        for f in findings
    ]
    return json.dumps(items, indent=2) + "\n"


def _sarif(findings: Sequence[Finding], base: str, version: str) -> str:
    codes = list(RULES)
    rules = [
        {
            "id": r.code,
            "name": r.name,
            "shortDescription": {"text": r.summary},
            "defaultConfiguration": {"level": "error"},
            "properties": {"fixable": r.fixable},
        }
        for r in RULES.values()
    ]
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": codes.index(f.code),
            "level": "error",
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": display_path(f.path, base), "uriBaseId": "%SRCROOT%"},
                        "region": {"startLine": f.line, "startColumn": f.col},
                    }
                }
            ],
        }
        for f in findings
    ]
    root_uri = "file://" + base.replace(os.sep, "/").rstrip("/") + "/"
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": TOOL_NAME, "version": version, "rules": rules}},
                "originalUriBaseIds": {"%SRCROOT%": {"uri": root_uri}},
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _github(findings: Sequence[Finding], base: str) -> str:
    return "".join(
        f"::error file={_escape_property(display_path(f.path, base))},line={f.line},col={f.col},"
        f"title={_escape_property(f'{f.code} {f.name}')}::{_escape_data(f.message)}\n"
        for f in findings
    )


def render(findings: Sequence[Finding], fmt: Format, base: str, version: str = "0.1.0") -> str:
    """``findings`` in output format ``fmt``, paths shown relative to ``base``."""
    if fmt == "text":
        return _text(findings, base)
    if fmt == "json":
        return _json(findings, base)
    if fmt == "sarif":
        return _sarif(findings, base, version)
    return _github(findings, base)


def statistics(findings: Sequence[Finding]) -> str:
    """One line per code: count, code, name, ``[*]`` when --fix can fix it; most frequent first."""
    counts = Counter(f.code for f in findings)
    fixable = {f.code for f in findings if f.fix is not None}
    width = max((len(str(n)) for n in counts.values()), default=1)
    return "".join(
        f"{n:>{width}}\t{code}\t{'[*] ' if code in fixable else ''}{RULES[code].name}\n"
        for code, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    )
