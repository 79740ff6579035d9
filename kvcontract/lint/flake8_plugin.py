"""kvcontract-lint as a flake8 plugin (codes ``KVC``): one file at a time, bases resolved from disk.

flake8 hands over each file separately (and may use several processes), so each process
keeps one resolver per configuration and reuses the modules it has parsed. ``# noqa``
and code selection are left to flake8 itself.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterator, Sequence
from importlib import metadata

from kvcontract.lint.config import ConfigError, LintConfig, load_config
from kvcontract.lint.contract_rules import ContractChecker
from kvcontract.lint.module_walker import summarize_source
from kvcontract.lint.modules import module_name_of
from kvcontract.lint.override_rules import OverrideSettings, override_findings
from kvcontract.lint.resolve import Resolver
from kvcontract.lint.runner import LintSettings, make_resolver
from kvcontract.lint.static_conditions import Target

__all__ = ["KVContractFlake8"]


def _version() -> str:
    try:
        return metadata.version("kvcontract")
    except metadata.PackageNotFoundError:
        return "0.1.0"


class _Session:
    """The resolver and settings shared by all files under one configuration."""

    def __init__(self, config: LintConfig) -> None:
        version = config.target_version or (sys.version_info.major, sys.version_info.minor)
        self.settings = LintSettings(
            extra_roots=config.extra_roots,
            contract_bases=config.contract_bases,
            exempt_dunders=config.exempt_dunders,
            target=Target(version, sys.platform),
            jobs=1,
            project_root=config.root,
        )
        self.resolver: Resolver = make_resolver([], self.settings)

    def check(self, path: str, data: bytes) -> Iterator[tuple[int, int, str]]:
        """Findings of one file as (line, 0-based column, "CODE message")."""
        module, is_package, root = module_name_of(path)
        self.resolver.finder.add_root(root)
        summary = summarize_source(data, path, module, is_package, self.settings.target)
        if summary.error is not None:
            yield summary.error.line, max(summary.error.col - 1, 0), f"KVC000 syntax error: {summary.error.message}"
            return
        self.resolver.add_given(summary)
        settings = OverrideSettings(exempt_dunders=self.settings.exempt_dunders, import_from=self.settings.import_from)
        contracts = ContractChecker(self.resolver, self.settings.contract_bases, {path: data})
        found = [*override_findings(self.resolver, summary, settings, {path}), *contracts.findings(summary)]
        for f in sorted(found, key=lambda f: f.sort_key()):
            yield f.line, f.col - 1, f"{f.code} {f.message}"


_SESSIONS: dict[str, _Session] = {}


def _session(path: str) -> _Session:
    try:
        config = load_config(os.path.dirname(path) or ".")
    except ConfigError:
        config = LintConfig(root=os.path.dirname(path) or ".")
    session = _SESSIONS.get(config.root)
    if session is None:
        session = _SESSIONS[config.root] = _Session(config)
    return session


class KVContractFlake8:
    """The flake8 entry point ``KVC``: yields kvcontract-lint findings for one file."""

    name = "kvcontract-lint"
    version: str = _version()

    def __init__(self, tree: ast.AST, filename: str, lines: Sequence[str] = ()) -> None:
        self.tree = tree
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[tuple[int, int, str, type[KVContractFlake8]]]:
        """What flake8 calls: (line, column, message, plugin type) per finding."""
        path = os.path.abspath(self.filename)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            # Standard input, or a file flake8 read but we cannot: use the lines it gives.
            data = "".join(self.lines).encode("utf-8")
        for line, col, message in _session(path).check(path, data):
            yield line, col, message, type(self)
