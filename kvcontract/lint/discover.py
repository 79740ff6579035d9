"""Which files to check: the Python files under the given paths, less the excluded ones.

Directories are walked; files named on the command line are always checked. Excluded
are the usual tool and environment directories, ``exclude`` patterns from the
configuration, and (unless disabled) whatever ``.gitignore`` files ignore, each applying
to its own directory as git does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import pathspec

__all__ = ["DEFAULT_EXCLUDES", "discover"]

DEFAULT_EXCLUDES = frozenset(
    {
        ".bzr",
        ".direnv",
        ".eggs",
        ".git",
        ".hg",
        ".mypy_cache",
        ".nox",
        ".pytest_cache",
        ".pytype",
        ".ruff_cache",
        ".svn",
        ".tox",
        ".venv",
        "__pycache__",
        "__pypackages__",
        "_build",
        "buck-out",
        "build",
        "dist",
        "node_modules",
        "site-packages",
        "venv",
    }
)
_SUFFIXES = (".py", ".pyi")


def _gitignore(directory: str) -> pathspec.GitIgnoreSpec | None:
    path = os.path.join(directory, ".gitignore")
    try:
        with open(path, encoding="utf-8") as handle:
            return pathspec.GitIgnoreSpec.from_lines(handle.read().splitlines())
    except OSError:
        return None


def _ancestor_specs(directory: str) -> list[tuple[str, pathspec.GitIgnoreSpec]]:
    """``.gitignore`` files above ``directory`` up to its git work tree's top (none outside git)."""
    chain: list[str] = []
    probe = directory
    while not os.path.exists(os.path.join(probe, ".git")):
        parent = os.path.dirname(probe)
        if parent == probe:
            return []
        probe = parent
        chain.append(probe)
    specs: list[tuple[str, pathspec.GitIgnoreSpec]] = []
    for ancestor in reversed(chain):
        spec = _gitignore(ancestor)
        if spec is not None:
            specs.append((ancestor, spec))
    return specs


def _ignored(path: str, is_dir: bool, specs: Iterable[tuple[str, pathspec.GitIgnoreSpec]]) -> bool:
    for base, spec in specs:
        rel = os.path.relpath(path, base).replace(os.sep, "/")
        if rel.startswith(".."):
            continue
        if spec.match_file(rel + "/" if is_dir else rel):
            return True
    return False


def discover(
    paths: Sequence[str],
    *,
    root: str,
    exclude: Sequence[str] = (),
    respect_gitignore: bool = True,
) -> list[str]:
    """Absolute paths of the files to check under ``paths``, sorted, without duplicates.

    ``exclude`` patterns are gitignore-style and relative to ``root`` (the configuration's
    directory). Raises ``FileNotFoundError`` naming a path that does not exist.
    """
    configured = pathspec.GitIgnoreSpec.from_lines(exclude) if exclude else None
    found: dict[str, None] = {}
    for given in paths:
        start = os.path.abspath(given)
        if not os.path.exists(start):
            raise FileNotFoundError(f"{given}: no such file or directory")
        if os.path.isfile(start):
            found[start] = None
            continue
        base_specs = _ancestor_specs(start) if respect_gitignore else []
        if configured is not None:
            base_specs.insert(0, (root, configured))
        stack: list[tuple[str, list[tuple[str, pathspec.GitIgnoreSpec]]]] = [(start, base_specs)]
        while stack:
            directory, specs = stack.pop()
            if respect_gitignore:
                own = _gitignore(directory)
                if own is not None:
                    specs = [*specs, (directory, own)]
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name in DEFAULT_EXCLUDES or entry.name.endswith(".egg-info"):
                        continue
                    if not _ignored(entry.path, True, specs):
                        stack.append((entry.path, specs))
                elif entry.name.endswith(_SUFFIXES) and not _ignored(entry.path, False, specs):
                    found[entry.path] = None
    return sorted(found)
