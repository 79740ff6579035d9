"""Reading and summarizing files, in worker processes when there are many.

Each worker names the file as a module, parses it and returns the summary; the parent
only resolves. Work is split by size so that both cores finish together.
"""

from __future__ import annotations

import gc
import multiprocessing
import multiprocessing.pool
import os
import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from kvcontract.lint.module_walker import summarize_source, summary_of_error
from kvcontract.lint.modules import ModuleLocation, module_name_of
from kvcontract.lint.static_conditions import Target
from kvcontract.lint.summary import ModuleSummary, SyntaxProblem

__all__ = ["ParsedFile", "default_jobs", "parse_files", "parse_location", "parse_locations"]

_NOQA = re.compile(rb"#\s*noqa(?::[\s]*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_CODE = re.compile(rb"[A-Z]+[0-9]+", re.IGNORECASE)
_PARALLEL_BYTES = 1 << 20


class ParsedFile(NamedTuple):
    """A checked file: its summary, its module root, and its ``# noqa`` comments by line."""

    summary: ModuleSummary
    root: str
    noqa: dict[int, frozenset[str] | None]


def _noqa(data: bytes) -> dict[int, frozenset[str] | None]:
    """``# noqa`` comments by line: ``None`` for a bare one, else the codes it names."""
    out: dict[int, frozenset[str] | None] = {}
    for match in _NOQA.finditer(data):
        line = data.count(b"\n", 0, match.start()) + 1
        codes = match.group("codes")
        out[line] = None if codes is None else frozenset(c.decode().upper() for c in _CODE.findall(codes))
    return out


def parse_file(path: str, target: Target, data: bytes | None = None) -> ParsedFile:
    """Name, read (unless ``data`` is given) and summarize one checked file."""
    module, is_package, root = module_name_of(path)
    if data is None:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            problem = SyntaxProblem(1, 1, f"cannot read file: {exc.strerror or exc}")
            return ParsedFile(summary_of_error(path, module, is_package, 0, problem), root, {})
    summary = summarize_source(data, path, module, is_package, target)
    return ParsedFile(summary, root, _noqa(data))


def parse_location(loc: ModuleLocation, target: Target) -> ModuleSummary | None:
    """Summarize a module found on disk for resolution (not checked itself)."""
    try:
        with open(loc.path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    return summarize_source(data, loc.path, loc.name, loc.is_package, target)


def default_jobs() -> int:
    """The number of CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


_worker_target: Target | None = None


def _init_worker(target: Target) -> None:
    global _worker_target
    _worker_target = target
    # Syntax trees hold no reference cycles: reference counting frees them, and the cyclic
    # collector would only rescan the growing results (it triples the parse time).
    gc.disable()


def _work(path: str) -> ParsedFile:
    assert _worker_target is not None
    return parse_file(path, _worker_target)


def _work_location(loc: ModuleLocation) -> ModuleSummary | None:
    assert _worker_target is not None
    return parse_location(loc, _worker_target)


def _pool(jobs: int, target: Target) -> multiprocessing.pool.Pool:
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    return context.Pool(jobs, initializer=_init_worker, initargs=(target,))


def parse_locations(locations: Sequence[ModuleLocation], target: Target, jobs: int) -> list[ModuleSummary | None]:
    """Summarize modules needed for resolution, in parallel when there are many."""
    if jobs <= 1 or len(locations) < 8:
        return [parse_location(loc, target) for loc in locations]
    with _pool(jobs, target) as pool:
        return pool.map(_work_location, locations, chunksize=2)


def parse_files(
    paths: Sequence[str], target: Target, jobs: int, sources: Mapping[str, bytes] | None = None
) -> list[ParsedFile]:
    """Parse ``paths`` (in ``jobs`` processes when the input is large enough), in input order.

    ``sources`` gives the text of files to take from memory instead of disk (used by ``--fix``).
    """
    in_memory = sources or {}
    results: dict[str, ParsedFile] = {p: parse_file(p, target, in_memory[p]) for p in paths if p in in_memory}
    pending = [p for p in paths if p not in results]
    sizes: list[int] = []
    for path in pending:
        try:
            sizes.append(os.path.getsize(path))
        except OSError:
            sizes.append(0)
    if jobs <= 1 or len(pending) < 2 or sum(sizes) < _PARALLEL_BYTES:
        results.update((path, parse_file(path, target)) for path in pending)
    else:
        order = sorted(range(len(pending)), key=lambda i: -sizes[i])
        with _pool(jobs, target) as pool:
            ordered = [pending[i] for i in order]
            results.update(zip(ordered, pool.imap(_work, ordered, chunksize=8)))
    return [results[p] for p in paths]
