"""Showing a simulation report: a table on the terminal, a JSON file and a PNG of the run.

Files are written next to their final name and renamed over it, so a full disk or an
interrupted run never leaves half a file. The PNG needs matplotlib, the ``plot`` extra,
imported only when a plot is drawn.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kvcontract.sim.observer import WhatIfSummary
from kvcontract.sim.simulator import SimulationReport

__all__ = ["PLOT_EXTRA", "print_report", "require_plotting", "write_plot", "write_summary"]

PLOT_EXTRA = "kvcontract[plot]"
"""The extra that installs what :func:`write_plot` needs."""


def print_report(report: SimulationReport, console: Console | None = None) -> None:
    """The figures of ``report`` as one table."""
    table = Table(title=f"kvcontract simulate ({report.device}, {report.seconds:.1f} s)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("requests", f"{report.requests:,}"),
        ("blocks requested", f"{report.blocks:,}"),
        ("hit ratio", f"{report.hit_ratio:.4f}"),
        ("tokens served from offload", f"{report.tokens_from_offload:,}"),
        ("bytes stored", _size(report.bytes_stored)),
        ("bytes loaded", _size(report.bytes_loaded)),
        ("transfer GB/s", f"{report.transfer_gbps:.2f}"),
        ("manager µs per block", f"{report.manager_us_per_block:.2f}"),
        ("blocks verified byte for byte", f"{report.verified_blocks:,}"),
        ("failed stores / loads", f"{report.failed_stores} / {report.failed_loads}"),
    ]
    for tier in report.tiers:
        rows += [
            (f"{tier.name}: blocks promoted / hits", f"{tier.promoted:,} / {tier.hits:,}"),
            (f"{tier.name}: blocks written", f"{tier.written:,}"),
            (f"{tier.name}: bytes read / written", f"{_size(tier.bytes_read)} / {_size(tier.bytes_written)}"),
            (f"{tier.name}: failed jobs", f"{tier.failed_jobs:,}"),
        ]
    if report.whatif is not None:
        rows += _whatif_rows(report.whatif)
    for name, value in rows:
        table.add_row(name, value)
    (console or Console()).print(table)


def _whatif_rows(whatif: WhatIfSummary) -> list[tuple[str, str]]:
    """One row per what-if figure: the hit ratio and its difference from the current setting's, on the same sample."""
    base = whatif.current

    def shown(ratio: float) -> str:
        return f"hit {ratio:.4f} ({ratio - base:+.4f})"

    sampled = "exact" if whatif.sample_rate >= 1 else f"sampled at {whatif.sample_rate:g}"
    rows = [(f"what-if ({sampled}): current setting", f"hit {base:.4f}")]
    rows += [(f"what-if: {multiple}x host memory", shown(ratio)) for multiple, ratio in whatif.capacity.items()]
    rows += [(f"what-if: policy {name}", shown(ratio)) for name, ratio in whatif.policy.items()]
    return rows


def _size(count: int) -> str:
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / 2**20:.1f} MiB"


def write_summary(report: SimulationReport, path: Path) -> None:
    """The figures of ``report`` as one JSON object in ``path``."""
    with _replacing(path) as temporary:
        temporary.write_text(json.dumps(report.summary()) + "\n", encoding="utf-8")


def require_plotting() -> None:
    """Raise ``ImportError`` naming the extra unless matplotlib, which plots need, is installed."""
    try:
        importlib.import_module("matplotlib")
    except ImportError as error:
        raise ImportError(f"plots need matplotlib: pip install '{PLOT_EXTRA}'") from error


def write_plot(report: SimulationReport, path: Path) -> None:
    """Hit ratio and transfer throughput against requests served, as a PNG."""
    require_plotting()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    served = [s.requests for s in report.samples]
    figure, (hits, throughput) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    hits.plot(served, [s.hit_ratio for s in report.samples])
    hits.set_ylabel("hit ratio (cumulative)")
    hits.set_ylim(0, 1)
    throughput.plot(served, [s.transfer_gbps for s in report.samples], color="tab:orange")
    throughput.set_ylabel("transfer GB/s (cumulative)")
    throughput.set_xlabel("requests served")
    hits.set_title(f"kvcontract simulate on {report.device}")
    figure.tight_layout()
    try:
        with _replacing(path) as temporary:
            figure.savefig(temporary, format="png")  # pyright: ignore[reportUnknownMemberType]  # matplotlib leaves **kwargs untyped
    finally:
        plt.close(figure)


@contextmanager
def _replacing(path: Path) -> Generator[Path, None, None]:
    """A temporary name beside ``path``, renamed over it once written, removed if writing fails."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield temporary
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
