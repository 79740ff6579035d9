"""Showing a simulation report: a table on the terminal and a PNG of the run."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from kvcontract.sim.simulator import SimulationReport

__all__ = ["print_report", "write_plot"]


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
    for name, value in rows:
        table.add_row(name, value)
    (console or Console()).print(table)


def _size(count: int) -> str:
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / 2**20:.1f} MiB"


def write_plot(report: SimulationReport, path: Path) -> None:
    """Hit ratio and transfer throughput against requests served, as a PNG."""
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
    figure.savefig(path)  # pyright: ignore[reportUnknownMemberType]  # matplotlib leaves **kwargs untyped
    plt.close(figure)
