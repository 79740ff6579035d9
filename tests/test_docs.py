"""The pages a newcomer reads first point at things that exist: no placeholder addresses, every
file they name is there, every example has a README, and the Python in the docs runs."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "CONTRIBUTING.md",
        ROOT / "mkdocs.yml",
        *ROOT.glob("docs/**/*.md"),
        *ROOT.glob("examples/*/README.md"),
    ]
)
_PLACEHOLDER = re.compile(r"https?://[\w.-]*example\.(invalid|com|org)\b")
_NAMED_FILE = re.compile(
    r"`((?:docs|examples|tools|requirements)/[\w./-]+\.\w+|CHANGELOG\.md|README\.md|CONTRIBUTING\.md|LICENSE)`"
)
_RELATIVE_LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_no_page_links_a_placeholder_address(page: Path) -> None:
    assert _PLACEHOLDER.findall(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "page", [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "CONTRIBUTING.md", *ROOT.glob("examples/*/README.md")]
)
def test_the_files_a_top_page_names_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    named = {name for name in _NAMED_FILE.findall(text)} | set(_RELATIVE_LINK.findall(text))
    missing = sorted(name for name in named if not (ROOT / name).exists() and not (page.parent / name).exists())
    assert missing == []


@pytest.mark.parametrize(
    "example", sorted(path for path in (ROOT / "examples").iterdir() if path.is_dir()), ids=lambda path: path.name
)
def test_every_example_has_a_readme(example: Path) -> None:
    assert (example / "README.md").is_file()


def _gate_install_commands(requirements: Path) -> list[str]:
    """The gate's own reading of a requirements file's install commands (tools/typecheck_gate.py)."""
    spec = importlib.util.spec_from_file_location("typecheck_gate", ROOT / "tools" / "typecheck_gate.py")
    assert spec is not None and spec.loader is not None
    gate = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gate  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(gate)
        commands: list[str] = gate.install_commands(requirements)
    finally:
        del sys.modules[spec.name]
    return commands


@pytest.mark.parametrize(
    ("engine", "pages"),
    [
        ("vllm", ["docs/vllm.md", "CONTRIBUTING.md"]),
        ("sglang", ["docs/sglang.md", "CONTRIBUTING.md"]),
        ("vllm-engine", ["docs/vllm.md"]),
    ],
)
def test_each_engine_s_cpu_test_install_is_quoted_from_its_one_source(engine: str, pages: list[str]) -> None:
    commands = _gate_install_commands(ROOT / "requirements" / f"{engine}.txt")
    assert len(commands) >= 2
    for page in pages:
        text = (ROOT / page).read_text(encoding="utf-8")
        missing = [c for c in commands if c not in text and c.removeprefix("python -m ") not in text]
        assert missing == [], f"{page} does not quote {missing} from requirements/{engine}.txt"


CODE_PAGES = sorted([ROOT / "README.md", *ROOT.glob("docs/**/*.md")])
_PYTHON_BLOCK = re.compile(
    r"^(?:<!-- not run: (?P<why>.*?) -->\n)?```python\n(?P<code>.*?)^```", re.MULTILINE | re.DOTALL
)
_OPT_OUT = re.compile(r"<!-- not run:")
_BLOCK_TIMEOUT = 120
"""Seconds one page's blocks may take: a quickstart's, not a benchmark's."""


def python_blocks(page: Path) -> list[tuple[int, str | None, str]]:
    """Each ```python block of ``page``: its first line, why it is not run (``None``: it is), its code."""
    text = page.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start("code")) + 1, match["why"], match["code"])
        for match in _PYTHON_BLOCK.finditer(text)
    ]


def _runner(page: Path) -> str:
    """A program that runs the page's blocks in order in one namespace, each under its own page and line."""
    name = page.relative_to(ROOT)
    lines = ["namespace: dict[str, object] = {'__name__': '__main__'}"]
    for line, why, code in python_blocks(page):
        if why is None:
            source = "\n" * (line - 1) + code  # tracebacks give the page's own line numbers
            lines.append(f"exec(compile({source!r}, {str(name)!r}, 'exec'), namespace)")
    return "\n".join(lines)


@pytest.mark.parametrize(
    "page",
    [page for page in CODE_PAGES if any(why is None for _, why, _ in python_blocks(page))],
    ids=lambda page: str(page.relative_to(ROOT)),
)
def test_the_python_blocks_of_a_page_run(page: Path, tmp_path: Path) -> None:
    """A page's blocks run in order in a fresh interpreter, as a reader pastes them one after another.

    A block that needs a GPU, an engine, a server or a package of the reader's own, or that
    shows code kvcontract refuses, says so on the line before it: ``<!-- not run: why -->``.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", _runner(page)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=_BLOCK_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("page", CODE_PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_block_left_out_says_why_and_precedes_a_python_block(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    reasons = [why for _, why, _ in python_blocks(page) if why is not None]
    assert len(_OPT_OUT.findall(text)) == len(reasons)
    assert all(why.strip() for why in reasons)
