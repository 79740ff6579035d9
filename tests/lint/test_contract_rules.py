"""KVC003-KVC006 on overrides of kvcontract contract methods, read from the contracts' own source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kvcontract.lint.flake8_plugin import KVContractFlake8
from tests.lint.support import found, lint_tree, write_tree

HEADER = """\
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from typing_extensions import override

from kvcontract import (
    LookupResult, ManagerStats, OffloadKey, OffloadingManager, LoadStoreSpec, PrepareStoreOutput, ReqContext,
)


class Manager(OffloadingManager):
"""

GOOD = {
    "lookup": "    @override\n    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:\n        return LookupResult.MISS\n",
    "prepare_load": "    @override\n    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> LoadStoreSpec:\n        return LoadStoreSpec()\n",
    "touch": "    @override\n    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:\n        return None\n",
    "prepare_store": "    @override\n    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:\n        return None\n",
    "stats": "    @override\n    def stats(self) -> ManagerStats:\n        return ManagerStats(capacity=0, used=0)\n",
    "reset_cache": "    @override\n    def reset_cache(self) -> None:\n        return None\n",
}


def lint_manager(tmp_path: Path, method: str, *codes: str) -> set[tuple[str, int]]:
    """Lint a complete, correct manager whose ``method`` entry is replaced; (code, line in method)."""
    replaced = dict(GOOD)
    name = method.split("def ", 1)[1].split("(", 1)[0]
    replaced[name] = method
    source = HEADER + "".join(replaced.values())
    write_tree(tmp_path, {"impl.py": source})
    offset = source.count("\n", 0, source.index(method))
    result = found(lint_tree(tmp_path, select=codes or ("KVC003", "KVC004", "KVC005", "KVC006")), tmp_path)
    return {(code, line - offset) for _, line, code in result}


def test_correct_implementation_is_clean(tmp_path: Path) -> None:
    write_tree(tmp_path, {"impl.py": HEADER + "".join(GOOD.values())})
    assert lint_tree(tmp_path) == []


@pytest.mark.parametrize(
    ("method", "fragment"),
    [
        (
            "    @override\n    def touch(self, ks: Sequence[OffloadKey], req_context: ReqContext) -> None: ...\n",
            "named 'keys'",
        ),
        (
            "    @override\n    def touch(self, keys: Sequence[OffloadKey]) -> None: ...\n",
            "'req_context' of contract method",
        ),
        (
            "    @override\n    def touch(self, keys: list[OffloadKey], req_context: ReqContext) -> None: ...\n",
            "narrowed to list",
        ),
        (
            "    @override\n    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext, x: int) -> None: ...\n",
            "'x' is required here",
        ),
        ("    @override\n    def stats(self) -> ManagerStats | None: ...\n", "wider than"),
        (
            "    @override\n    def complete_store(self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool) -> None: ...\n",
            "has a default",
        ),
    ],
)
def test_kvc003_positive(tmp_path: Path, method: str, fragment: str) -> None:
    source = HEADER + "".join(GOOD.values()) + method
    write_tree(tmp_path, {"impl.py": source})
    messages = [f.message for f in lint_tree(tmp_path, select=("KVC003",))]
    assert len(messages) == 1 and fragment in messages[0], messages


@pytest.mark.parametrize(
    "method",
    [
        "    @override\n    def touch(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None: ...\n",
        "    @override\n    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext, extra: int = 0) -> None: ...\n",
        "    @override\n    def touch(self, *args: Any, **kwargs: Any) -> None: ...\n",
        "    @override\n    def touch(self, keys: Collection[OffloadKey], req_context: ReqContext) -> None: ...\n",
        "    @override\n    def touch(self, keys: object, req_context: object) -> None: ...\n",
        "    @override\n    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput: ...\n",
        "    @override\n    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None: ...\n",
    ],
)
def test_kvc003_negative(tmp_path: Path, method: str) -> None:
    assert lint_manager(tmp_path, method, "KVC003") == set()


def test_kvc006_missing_annotations(tmp_path: Path) -> None:
    method = "    @override\n    def touch(self, keys, req_context: ReqContext):\n        return None\n"
    assert lint_manager(tmp_path, method, "KVC006") == {("KVC006", 2)}


@pytest.mark.parametrize(
    "body",
    [
        "        for k in list(keys):\n            print(k)\n",
        "        print(len(tuple(keys)))\n",
        "        print(list(keys)[0])\n",
        "        copy = list(keys)\n        for k in copy:\n            print(k)\n",
        "        print(keys[0] in tuple(keys))\n",
    ],
)
def test_kvc004_positive(tmp_path: Path, body: str) -> None:
    method = "    @override\n    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:\n" + body
    assert {code for code, _ in lint_manager(tmp_path, method)} == {"KVC004"}


@pytest.mark.parametrize(
    "body",
    [
        "        copy = list(keys)\n        copy.append(keys[0])\n",
        "        self.saved = list(keys)\n",
        "        keys = [k for k in keys if k]\n        print(list(keys))\n",
        "        for k in keys:\n            print(k)\n",
    ],
)
def test_kvc004_negative(tmp_path: Path, body: str) -> None:
    method = "    @override\n    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:\n" + body
    assert lint_manager(tmp_path, method) == set()


@pytest.mark.parametrize(
    "body",
    [
        "        print(len(keys))\n",
        "        print(keys[0])\n",
        "        for k in keys:\n            print(k)\n        print(sorted(keys))\n",
        "        while True:\n            print(list(keys))\n",
        "        print([k in keys for k in range(3)])\n",
        "        print([k for keys in [1] for k in keys], keys[0])\n",
        "        print([k for k in keys if k], len(keys))\n",
    ],
)
def test_kvc005_positive(tmp_path: Path, body: str) -> None:
    method = (
        "    @override\n    def complete_load(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:\n"
        + body
    )
    assert {code for code, _ in lint_manager(tmp_path, method)} == {"KVC005"}


@pytest.mark.parametrize(
    "body",
    [
        "        for k in keys:\n            print(k)\n",
        "        keys = list(keys)\n        print(len(keys), keys[0])\n",
        "        print(sum(1 for _ in keys))\n",
        "        if req_context.req_id:\n            print(list(keys))\n        else:\n            print(sorted(keys))\n",
        "        if req_context.req_id:\n            for k in keys:\n                print(k)\n            return\n        print(list(keys))\n",
        "        done = list(keys)\n        held = {'r': {done[0]}}\n        print(next(r for r, keys in held.items() if done[0] in keys))\n",
        "        done = list(keys)\n        print([len(keys) for keys in [done]], (lambda keys: keys[0])(done))\n",
    ],
)
def test_kvc005_negative(tmp_path: Path, body: str) -> None:
    method = (
        "    @override\n    def complete_load(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:\n"
        + body
    )
    assert lint_manager(tmp_path, method) == set()


def test_configured_contract_bases(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "proto.py": "from typing import Protocol\n\nclass Policy(Protocol):\n    def pick(self, keys: list[int]) -> int: ...\n",
            "impl.py": "from proto import Policy\n\nclass Mine(Policy):\n    def pick(self, keys):\n        return 0\n",
        },
    )
    assert found(lint_tree(tmp_path, select=("KVC006",)), tmp_path) == set()
    configured = lint_tree(tmp_path, select=("KVC006",), contract_bases=("proto.Policy",))
    assert found(configured, tmp_path) == {("impl.py", 4, "KVC006")}


MIXIN = """\
from collections.abc import Sequence

from kvcontract import OffloadKey, ReqContext


class TouchMixin:
    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
        return None

    def helper(self) -> int:
        return 0
"""

MIXED = HEADER.replace(
    "class Manager(OffloadingManager):",
    "from mixin import TouchMixin\n\n\nclass Manager(TouchMixin, OffloadingManager):",
)


def test_kvc001_for_a_contract_method_taken_from_a_plain_mixin(tmp_path: Path) -> None:
    body = "".join(v for k, v in GOOD.items() if k != "touch")
    source = MIXED + body + "\n\nclass Derived(Manager):\n    pass\n"
    write_tree(tmp_path, {"mixin.py": MIXIN, "impl.py": source})
    findings = lint_tree(tmp_path)
    line = source.splitlines().index("class Manager(TouchMixin, OffloadingManager):") + 1
    assert found(findings, tmp_path) == {("impl.py", line, "KVC001")}
    (finding,) = findings
    assert finding.message.startswith(
        "class 'Manager' takes 'touch' from mixin mixin.TouchMixin, which overrides contract "
        "method OffloadingManager.touch without @override"
    )


def test_a_mixin_method_with_override_or_shadowed_by_the_class_is_clean(tmp_path: Path) -> None:
    marked = MIXIN.replace("    def touch", "    @override\n    def touch").replace(
        "from kvcontract", "from typing_extensions import override\n\nfrom kvcontract"
    )
    body = "".join(v for k, v in GOOD.items() if k != "touch")
    write_tree(tmp_path, {"mixin.py": marked, "impl.py": MIXED + body})
    assert found(lint_tree(tmp_path, ["impl.py"]), tmp_path) == set()
    write_tree(tmp_path, {"mixin.py": MIXIN, "impl.py": MIXED + "".join(GOOD.values())})
    assert found(lint_tree(tmp_path, ["impl.py"]), tmp_path) == set()


def test_the_flake8_plugin_reports_the_mixin_case_too(tmp_path: Path) -> None:
    body = "".join(v for k, v in GOOD.items() if k != "touch")
    source = MIXED + body
    write_tree(tmp_path, {"mixin.py": MIXIN, "impl.py": source})
    path = tmp_path / "impl.py"
    lines = source.splitlines(keepends=True)
    results = list(KVContractFlake8(ast.parse(source), str(path), lines).run())
    line = source.splitlines().index("class Manager(TouchMixin, OffloadingManager):") + 1
    assert [(row, message.split()[0]) for row, _, message, _ in results] == [(line, "KVC001")]
