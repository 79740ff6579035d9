"""How the reports of ``simulate`` and ``plan`` reach a terminal or a pipe.

On a terminal a table is drawn by rich and a progress bar runs on standard error. When the
output is a file or a pipe, a table is its title and tab-separated lines, a header first (no
box, no wrapping at 80 columns, no blank line before it), so that ``cut``, ``awk`` and
spreadsheets read it, and no progress bar is drawn: it would only leave control characters
and blank lines behind.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Generator, Sequence
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table

__all__ = ["progress", "replacing", "show_line", "show_table", "size_text", "write_text"]


@contextmanager
def replacing(path: Path) -> Generator[Path, None, None]:
    """A temporary name beside ``path``, renamed over it once written, removed if writing fails:
    every file a command writes appears whole or not at all, never half written."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield temporary
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    """``text`` as the whole of ``path`` (UTF-8), through :func:`replacing`."""
    with replacing(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def show_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    left: Collection[int] = (0,),
    console: Console | None = None,
) -> None:
    """``rows`` under ``columns``: a rich table on a terminal, else the title and tab-separated lines.

    Columns whose index is in ``left`` are aligned left on a terminal, the others right.
    """
    out = console or Console()
    if not out.is_terminal:
        for line in (title, "\t".join(columns), *("\t".join(row) for row in rows)):
            show_line(line, out)
        return
    table = Table(title=title)
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index in left else "right")
    for row in rows:
        table.add_row(*row)
    out.print(table)


def show_line(text: str, console: Console | None = None) -> None:
    """One line as written: never wrapped, no rich markup read into it, tabs kept off a terminal."""
    out = console or Console()
    if out.is_terminal:
        out.print(text, soft_wrap=True, markup=False, highlight=False)
    else:
        out.file.write(f"{text}\n")


@contextmanager
def progress(description: str, total: int) -> Generator[Callable[[int], None], None, None]:
    """A callable taking the count done so far: a progress bar while standard error is a terminal
    (removed when the block ends). An interrupt of the block carries a note of how far it got
    (``simulating on cpu: 120 of 3,000 done``), which the command line prints."""
    done_so_far = 0

    def count(done: int) -> None:
        nonlocal done_so_far
        done_so_far = done

    console = Console(stderr=True)
    try:
        if not console.is_terminal:
            yield count
            return
        columns = (TextColumn(description), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task(description, total=total)

            def advance(done: int) -> None:
                count(done)
                bar.update(task, completed=done)

            yield advance
    except KeyboardInterrupt as interruption:
        interruption.add_note(f"{description}: {done_so_far:,} of {total:,} done")
        raise


def size_text(count: int) -> str:
    """A byte count for a reader: ``32.00 MiB``, ``1.59 GiB``, ``512 B``."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.2f} {unit}"
    return f"{count:,} B"
