"""``[tool.kvcontract-lint]`` in the nearest pyproject.toml: read, validated, with clear errors.

Keys (kebab-case, all optional)::

    select = ["KVC"]                 # codes or prefixes to enable
    ignore = ["KVC007"]              # codes or prefixes to disable
    per-file-ignores = {"tests/*" = ["KVC001"]}
    extra-roots = ["src", "../common"]   # where else bases are resolved from
    contract-bases = ["mylib.protocols.Policy"]  # extra contract classes
    exclude = ["generated/"]         # gitignore-style, relative to the pyproject
    exempt-dunders = false           # exempt every __dunder__ from KVC001
    respect-gitignore = true
    target-version = "3.10"          # else from [project] requires-python
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeGuard

from kvcontract.lint.codes import known_code

__all__ = ["ConfigError", "LintConfig", "find_pyproject", "load_config", "parse_version"]

_KEYS = (
    "select",
    "ignore",
    "per-file-ignores",
    "extra-roots",
    "contract-bases",
    "exclude",
    "exempt-dunders",
    "respect-gitignore",
    "target-version",
)


class ConfigError(ValueError):
    """Invalid configuration: the message names the file, the key, what was wrong and what is expected."""


@dataclass(frozen=True)
class LintConfig:
    """The settings read from ``[tool.kvcontract-lint]``; ``root`` is the pyproject's directory."""

    root: str
    select: tuple[str, ...] = ("KVC",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    extra_roots: tuple[str, ...] = ()
    contract_bases: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    exempt_dunders: bool = False
    respect_gitignore: bool = True
    target_version: tuple[int, int] | None = None


def find_pyproject(start: str) -> str | None:
    """The nearest ``pyproject.toml`` at or above ``start`` (a file or directory)."""
    directory = os.path.abspath(start)
    if not os.path.isdir(directory):
        directory = os.path.dirname(directory)
    while True:
        candidate = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def parse_version(text: str, where: str) -> tuple[int, int]:
    """``"3.10"``, ``"py310"`` or ``">=3.10"`` as ``(3, 10)``."""
    match = re.search(r"(\d+)\.(\d+)", text) or re.fullmatch(r"py(\d)(\d+)", text.strip())
    if match is None:
        raise ConfigError(f'{where}: cannot read a Python version from {text!r}; write it like "3.10"')
    return int(match.group(1)), int(match.group(2))


def _strings(value: object, where: str, what: str) -> tuple[str, ...]:
    if not _is_list(value):
        raise ConfigError(f"{where} must be a list of {what}, got {value!r}")
    strings = tuple(v for v in value if isinstance(v, str))
    if len(strings) != len(value):
        raise ConfigError(f"{where} must be a list of {what}, got {value!r}")
    return strings


def _codes(value: object, where: str) -> tuple[str, ...]:
    codes = _strings(value, where, 'rule codes such as "KVC001" or prefixes such as "KVC"')
    try:
        return tuple(known_code(code) for code in codes)
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false, got {value!r}")
    return value


def config_from_table(
    table: Mapping[str, object], root: str, path: str, requires_python: str | None = None
) -> LintConfig:
    """Validate a ``[tool.kvcontract-lint]`` table read from ``path``."""
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {', '.join(map(repr, unknown))} in [tool.kvcontract-lint]; "
            f"valid keys: {', '.join(_KEYS)}"
        )
    prefix = f"{path}: tool.kvcontract-lint"
    per_file: list[tuple[str, tuple[str, ...]]] = []
    raw_per_file = table.get("per-file-ignores", {})
    if not _is_table(raw_per_file):
        raise ConfigError(f"{prefix}.per-file-ignores must be a table of glob = [codes], got {raw_per_file!r}")
    for pattern, codes in raw_per_file.items():
        per_file.append((pattern, _codes(codes, f"{prefix}.per-file-ignores.{pattern!r}")))
    version: tuple[int, int] | None = None
    if "target-version" in table:
        raw = table["target-version"]
        if not isinstance(raw, str):
            raise ConfigError(f'{prefix}.target-version must be a string such as "3.10", got {raw!r}')
        version = parse_version(raw, f"{prefix}.target-version")
    elif requires_python:
        version = parse_version(requires_python, f"{path}: project.requires-python")
    return LintConfig(
        root=root,
        select=_codes(table["select"], f"{prefix}.select") if "select" in table else ("KVC",),
        ignore=_codes(table.get("ignore", []), f"{prefix}.ignore"),
        per_file_ignores=tuple(per_file),
        extra_roots=_strings(table.get("extra-roots", []), f"{prefix}.extra-roots", "directories"),
        contract_bases=_strings(table.get("contract-bases", []), f"{prefix}.contract-bases", "qualified class names"),
        exclude=_strings(table.get("exclude", []), f"{prefix}.exclude", "gitignore-style patterns"),
        exempt_dunders=_bool(table.get("exempt-dunders", False), f"{prefix}.exempt-dunders"),
        respect_gitignore=_bool(table.get("respect-gitignore", True), f"{prefix}.respect-gitignore"),
        target_version=version,
    )


def load_config(start: str, explicit: str | None = None) -> LintConfig:
    """The configuration for a run from ``start``: ``explicit`` if given, else the nearest
    pyproject.toml; defaults (rooted at ``start``) when there is none."""
    path = explicit or find_pyproject(start)
    if path is None:
        root = os.path.abspath(start if os.path.isdir(start) else os.path.dirname(start) or ".")
        return LintConfig(root=root)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    tool = _table(data.get("tool"))
    table = _table(tool.get("kvcontract-lint"))
    if "kvcontract-lint" in tool and not _is_table(tool["kvcontract-lint"]):
        raise ConfigError(f"{path}: [tool.kvcontract-lint] must be a table")
    requires = _table(data.get("project")).get("requires-python")
    return config_from_table(
        table, os.path.dirname(os.path.abspath(path)), path, requires if isinstance(requires, str) else None
    )


def _table(value: object) -> dict[str, object]:
    """``value`` if it is a TOML table, else an empty one."""
    return value if _is_table(value) else {}


def _is_table(value: object) -> TypeGuard[dict[str, object]]:
    """Whether ``value`` is a TOML table (whose keys TOML makes strings)."""
    return isinstance(value, dict)


def _is_list(value: object) -> TypeGuard[list[object]]:
    """Whether ``value`` is a TOML array."""
    return isinstance(value, list)
