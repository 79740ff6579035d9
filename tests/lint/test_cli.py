"""The command line: file discovery, selection, noqa, configuration, syntax errors, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcontract.lint.cli import main
from kvcontract.lint.discover import discover
from tests.lint.support import write_tree

BAD = "class Item:\n    def __repr__(self) -> str:\n        return 'x'\n"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(tmp_path, {"clean.py": "class A:\n    pass\n", "bad.py": BAD})
    assert run(capsys, str(tmp_path / "clean.py"))[0] == 0
    assert run(capsys, str(tmp_path / "bad.py"))[0] == 1
    assert run(capsys, "--exit-zero", str(tmp_path / "bad.py"))[0] == 0
    code, _, err = run(capsys, str(tmp_path / "missing.py"))
    assert code == 2 and "missing.py: no such file or directory" in err
    code, _, err = run(capsys, "--select", "E501", str(tmp_path))
    assert code == 2 and "no rule code" in err
    assert run(capsys, "--format", "xml", str(tmp_path))[0] == 2
    assert run(capsys, "--help")[0] == 0


@pytest.mark.parametrize("option", ["--select", "--ignore"])
@pytest.mark.parametrize("code", ["KVC999", "KVC1", "KVC0071"])
def test_a_code_no_rule_has_is_one_line_listing_the_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, code: str
) -> None:
    write_tree(tmp_path, {"bad.py": BAD})
    status, out, err = run(capsys, option, code, str(tmp_path))
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("kvcontract-lint: error: "), err
    assert f"{code!r} is no rule code or prefix" in err and "KVC000, KVC001" in err and "KVC007" in err


def test_a_prefix_of_known_codes_selects_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(tmp_path, {"bad.py": BAD})
    assert run(capsys, "--select", "KVC00", str(tmp_path))[0] == 1
    assert run(capsys, "--select", "kvc001", str(tmp_path))[0] == 1


def test_a_configured_code_no_rule_has_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(tmp_path, {"pyproject.toml": "[tool.kvcontract-lint]\nselect = ['KVC999']\n", "bad.py": BAD})
    status, out, err = run(capsys, str(tmp_path))
    assert (status, out) == (2, "") and "'KVC999' is no rule code or prefix" in err and "KVC001" in err


@pytest.mark.parametrize("arguments", [["--format", "xml"], ["--jobs", "many"], ["--no-such-option"]])
def test_an_argument_error_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str]
) -> None:
    status, out, err = run(capsys, *arguments, str(tmp_path))
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("kvcontract-lint: error: ") and "kvcontract-lint --help" in err, err


def test_default_path_is_current_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tree(tmp_path, {"pkg/bad.py": BAD})
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys)
    assert code == 1 and out.startswith("pkg/bad.py:2:9: KVC001 ")


def test_syntax_error_is_reported_and_the_rest_still_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tree(tmp_path, {"broken.py": "def f(:\n    pass\n", "bad.py": BAD})
    code, out, _ = run(capsys, str(tmp_path))
    assert code == 1
    assert [line.split()[1] for line in out.splitlines()] == ["KVC001", "KVC000"]
    assert "broken.py:1:7: KVC000 syntax error" in out


def test_select_and_ignore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(tmp_path, {"bad.py": BAD + "\nfrom missing import X\n\nclass Y(X):\n    pass\n"})
    _, out, _ = run(capsys, "--format", "json", str(tmp_path))
    assert {i["code"] for i in json.loads(out)} == {"KVC001", "KVC007"}
    _, out, _ = run(capsys, "--format", "json", "--select", "KVC007", str(tmp_path))
    assert {i["code"] for i in json.loads(out)} == {"KVC007"}
    _, out, _ = run(capsys, "--format", "json", "--ignore", "KVC00", str(tmp_path))
    assert json.loads(out) == []


def test_noqa(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = (
        "class A:\n"
        "    def __repr__(self) -> str:  # noqa: KVC001\n        return ''\n"
        "    def __str__(self) -> str:  # noqa\n        return ''\n"
        "    def __hash__(self) -> int:  # noqa: KVC002, E501\n        return 0\n"
        "    def __format__(self, spec: str) -> str:  # NOQA:KVC001\n        return ''\n"
    )
    write_tree(tmp_path, {"a.py": source})
    code, out, _ = run(capsys, str(tmp_path))
    assert code == 1 and [line.split(":")[1] for line in out.splitlines()] == ["6"]


def test_statistics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(tmp_path, {"bad.py": BAD, "worse.py": BAD})
    _, out, _ = run(capsys, "--statistics", str(tmp_path))
    assert out.splitlines()[-1] == "2\tKVC001\t[*] missing-override"


def test_configuration_from_pyproject(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tree(
        tmp_path,
        {
            "pyproject.toml": """
                [project]
                requires-python = ">=3.12"

                [tool.kvcontract-lint]
                ignore = ["KVC007"]
                per-file-ignores = {"legacy/*" = ["KVC001"]}
                exclude = ["generated/"]
                exempt-dunders = true
                """,
            "src/a.py": "class A:\n    def __repr__(self) -> str: ...\n    def run(self) -> None: ...\n\nclass B(A):\n    def run(self) -> None: ...\n",
            "legacy/old.py": "class A:\n    def __eq__(self, o: object) -> bool: ...\n\nclass B(A):\n    def __eq__(self, o: object) -> bool: ...\n",
            "generated/gen.py": BAD,
            "src/unresolved.py": "from missing import X\n\nclass Y(X):\n    pass\n",
        },
    )
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "--format", "json", "--fix", "--diff")
    assert code == 1 and "+from typing import override" in out
    code, out, _ = run(capsys, "--format", "json")
    assert [(i["path"], i["line"]) for i in json.loads(out)] == [("src/a.py", 6)]


def test_invalid_configuration_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(tmp_path, {"pyproject.toml": "[tool.kvcontract-lint]\nselekt = ['KVC001']\n", "a.py": BAD})
    code, _, err = run(capsys, str(tmp_path))
    assert code == 2 and "unknown key(s) 'selekt'" in err and "valid keys: select" in err
    write_tree(tmp_path, {"pyproject.toml": "[tool.kvcontract-lint]\nselect = 'KVC001'\n"})
    code, _, err = run(capsys, str(tmp_path))
    assert code == 2 and "tool.kvcontract-lint.select must be a list" in err


def test_gitignore_is_honoured(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            ".gitignore": "ignored_dir/\n*_gen.py\n",
            "keep.py": "",
            "stub.pyi": "",
            "ignored_dir/x.py": "",
            "sub/a_gen.py": "",
            "sub/.gitignore": "local.py\n",
            "sub/local.py": "",
            "sub/kept.py": "",
            ".venv/lib.py": "",
            "notes.txt": "",
        },
    )
    (tmp_path / ".git").mkdir()
    rel = sorted(Path(p).relative_to(tmp_path).as_posix() for p in discover([str(tmp_path)], root=str(tmp_path)))
    assert rel == ["keep.py", "stub.pyi", "sub/kept.py"]
    everything = discover([str(tmp_path)], root=str(tmp_path), respect_gitignore=False)
    assert len(everything) == 6
    excluded = discover([str(tmp_path)], root=str(tmp_path), exclude=["sub/"])
    assert sorted(Path(p).name for p in excluded) == ["keep.py", "stub.pyi"]
    named = discover([str(tmp_path / "ignored_dir" / "x.py")], root=str(tmp_path))
    assert named == [str(tmp_path / "ignored_dir" / "x.py")]


def test_a_clean_run_says_how_many_files_it_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(tmp_path, {"a.py": "class A:\n    pass\n", "b.py": "x = 1\n"})
    code, out, err = run(capsys, str(tmp_path))
    assert (code, out, err) == (0, "", "kvcontract-lint: 2 files read, no findings\n")


def test_under_kvcontract_the_lint_names_itself(capsys: pytest.CaptureFixture[str]) -> None:
    from kvcontract.cli import main as kvcontract_main

    assert kvcontract_main(["lint", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: kvcontract lint ")
    assert kvcontract_main(["lint", "--statistcs"]) == 2
    assert capsys.readouterr().err == (
        "kvcontract lint: error: unrecognized arguments: --statistcs; did you mean --statistics? "
        "(see kvcontract lint --help)\n"
    )
