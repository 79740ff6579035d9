"""Finding modules on disk by name, and naming files as modules, without importing anything.

Search follows Python's own order inside each root (package directory, then module file,
then compiled extension, then namespace directory) and prefers a ``.pyi`` stub to its
``.py``, as type checkers do. Directory listings are cached, so each directory is read once.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple

__all__ = ["ModuleFinder", "ModuleLocation", "default_roots", "module_name_of"]

Kind = Literal["source", "stub", "namespace", "compiled", "builtin"]
_EXTENSION_SUFFIXES = (".so", ".pyd")
_FILE_KINDS: tuple[tuple[str, Kind], ...] = ((".pyi", "stub"), (".py", "source"))
_STDLIB_ROOTS = tuple(
    dict.fromkeys(
        os.path.abspath(p)
        for p in (
            sysconfig.get_paths()["stdlib"],
            sysconfig.get_paths()["platstdlib"],
            os.path.join(sysconfig.get_paths()["platstdlib"], "lib-dynload"),
        )
        if os.path.isdir(p)
    )
)


class ModuleLocation(NamedTuple):
    """Where a module lives: its file (empty for namespace, builtin and compiled ones) and kind."""

    name: str
    path: str
    kind: Kind
    is_package: bool


def module_name_of(path: str) -> tuple[str, bool, str]:
    """Module name, package flag and search root of a file, from its chain of ``__init__`` files."""
    directory, filename = os.path.split(os.path.abspath(path))
    stem = filename.rsplit(".", 1)[0]
    is_package = stem == "__init__"
    parts: list[str] = [] if is_package else [stem]
    while True:
        base = os.path.basename(directory)
        has_init = os.path.isfile(os.path.join(directory, "__init__.py")) or os.path.isfile(
            os.path.join(directory, "__init__.pyi")
        )
        if not has_init or not base.isidentifier():
            break
        parts.insert(0, base)
        directory = os.path.dirname(directory)
    return ".".join(parts), is_package, directory


def default_roots(extra: Iterable[str] = ()) -> list[str]:
    """Search roots after those of the checked files: configured roots, kvcontract's own, ``sys.path``."""
    own = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    roots: list[str] = []
    for root in (*extra, own, *sys.path):
        if root and os.path.isdir(root):
            absolute = os.path.abspath(root)
            if absolute not in roots:
                roots.append(absolute)
    return roots


class ModuleFinder:
    """Finds modules by dotted name over ordered search roots; results and listings are cached."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.roots: list[str] = list(roots)
        self._listings: dict[str, frozenset[str] | None] = {}
        self._found: dict[str, ModuleLocation | None] = {}

    def add_root(self, root: str) -> None:
        """Search ``root`` before the roots added later (checked files' roots come first)."""
        if root not in self.roots:
            self.roots.append(root)
            self._found.clear()

    def listing(self, directory: str) -> frozenset[str] | None:
        """The entries of ``directory``, or ``None`` if it is not a readable directory."""
        if directory in self._listings:
            return self._listings[directory]
        try:
            entries: frozenset[str] | None = frozenset(os.listdir(directory))
        except OSError:
            entries = None
        self._listings[directory] = entries
        return entries

    def find(self, name: str) -> ModuleLocation | None:
        """Locate module ``name``: the first root that has it wins."""
        if name in self._found:
            return self._found[name]
        found: ModuleLocation | None = None
        if name in sys.builtin_module_names:
            found = ModuleLocation(name, "", "builtin", False)
        else:
            parts = name.split(".")
            namespace: ModuleLocation | None = None
            for root in self._roots_for(parts[0]):
                hit = self._find_in(root, name, parts)
                if hit is None:
                    continue
                if hit.kind != "namespace":
                    found = hit
                    break
                namespace = namespace or hit
            found = found or namespace
        self._found[name] = found
        return found

    def _roots_for(self, top: str) -> list[str]:
        """Search order for a top-level name: the standard library first for its own names, so
        that a project's ``types.py`` or ``enum.py`` does not hide the real one."""
        if top not in sys.stdlib_module_names:
            return self.roots
        return [*_STDLIB_ROOTS, *(r for r in self.roots if r not in _STDLIB_ROOTS)]

    def _find_in(self, root: str, name: str, parts: Sequence[str]) -> ModuleLocation | None:
        directory = root
        for part in parts[:-1]:
            entries = self.listing(directory)
            if entries is None:
                return None
            stubs = part + "-stubs"
            if directory == root and stubs in entries:
                directory = os.path.join(directory, stubs)
            elif part in entries:
                directory = os.path.join(directory, part)
            else:
                return None
        entries = self.listing(directory)
        if entries is None:
            return None
        last = parts[-1]
        candidates = [last + "-stubs", last] if len(parts) == 1 else [last]
        for candidate in candidates:
            if candidate in entries:
                package = os.path.join(directory, candidate)
                inner = self.listing(package)
                if inner is not None:
                    for init in ("__init__.pyi", "__init__.py"):
                        if init in inner:
                            kind: Kind = "stub" if init.endswith("i") else "source"
                            return ModuleLocation(name, os.path.join(package, init), kind, True)
        for suffix, kind in _FILE_KINDS:
            if last + suffix in entries:
                return ModuleLocation(name, os.path.join(directory, last + suffix), kind, False)
        prefix = last + "."
        for entry in entries:
            if entry.startswith(prefix) and entry.endswith(_EXTENSION_SUFFIXES):
                return ModuleLocation(name, os.path.join(directory, entry), "compiled", False)
        if last in entries and self.listing(os.path.join(directory, last)) is not None:
            return ModuleLocation(name, "", "namespace", True)
        return None
