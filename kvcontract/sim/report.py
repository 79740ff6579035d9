"""Showing a simulation report: what ran, a table of the figures and the check's verdict, and a
PNG of the run (the JSON is the command's: the report's figures and the run's identity).

Files are written next to their final name and renamed over it, so a full disk or an
interrupted run never leaves half a file. The PNG needs matplotlib, the ``plot`` extra,
imported only when a plot is drawn.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from kvcontract.config import (
    CPUManagerConfig,
    FileTierConfig,
    KVContractConfig,
    MooncakeTierConfig,
)
from kvcontract.config.tiers import ExternalTierConfig, TierConfig
from kvcontract.extras import MissingExtraError
from kvcontract.sim.observer import WhatIfSummary
from kvcontract.sim.output import (
    replacing,
    show_line,
    show_table,
    size_text,
)
from kvcontract.sim.simulator import SimulationReport

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "PLOT_EXTRA",
    "check_verdict",
    "print_report",
    "require_plotting",
    "run_figure",
    "run_heading",
    "write_plot",
]

PLOT_EXTRA = "kvcontract[plot]"
"""The extra that installs what :func:`write_plot` needs."""


def print_report(report: SimulationReport, heading: Sequence[str] = (), console: Console | None = None) -> None:
    """``heading`` (what ran, from :func:`run_heading`), the figures of ``report`` as one table,
    and the verdict of the byte-for-byte check."""
    rows = [
        ("requests", f"{report.requests:,}"),
        ("blocks requested", f"{report.blocks:,}"),
        ("hit ratio", _hit_ratio_text(report)),
        ("tokens served from offload", f"{report.tokens_from_offload:,}"),
        ("bytes stored", size_text(report.bytes_stored)),
        ("bytes loaded", size_text(report.bytes_loaded)),
        ("transfer GiB/s", f"{report.transfer_gbps * 1e9 / 2**30:.2f}"),
        ("copy loop", report.copy_path or "unknown"),
        ("manager µs per block", f"{report.manager_us_per_block:.2f}"),
        ("blocks verified byte for byte", f"{report.verified_blocks:,}"),
        ("failed stores / loads", f"{report.failed_stores} / {report.failed_loads}"),
    ]
    for tier in report.tiers:
        if not tier.reachable:
            rows.append((f"{tier.name}: state", "UNREACHABLE at the end of the run (degraded: lookups missed)"))
        rows += [
            (f"{tier.name}: blocks promoted / hits", f"{tier.promoted:,} / {tier.hits:,}"),
            (f"{tier.name}: blocks written", f"{tier.written:,}"),
            (f"{tier.name}: bytes read / written", f"{size_text(tier.bytes_read)} / {size_text(tier.bytes_written)}"),
            (f"{tier.name}: failed jobs", f"{tier.failed_jobs:,}"),
        ]
    if report.whatif is not None:
        rows += _whatif_rows(report.whatif)
    out = console or Console()
    for line in heading:
        show_line(line, out)
    show_table(f"figures ({report.device}, {report.seconds:.1f} s)", ("figure", "value"), rows, console=out)
    show_line(check_verdict(report.verified_blocks), out)
    for tier in report.tiers:
        if not tier.reachable:
            show_line(
                f"warning: {tier.name}'s store did not answer at the end of the run: it ran degraded, so its "
                "figures count what it missed, not what it would have served",
                out,
            )


def _hit_ratio_text(report: SimulationReport) -> str:
    """The hit ratio beside its bound from a cold start, and why a run passed it (a tier kept blocks from before)."""
    text = f"{report.hit_ratio:.4f} (cold-start bound {report.hit_ratio_bound:.4f}: room for every block"
    if report.hit_ratio > report.hit_ratio_bound:
        text += "; above it, a persistent or shared tier held blocks from before the run"
    return text + ")"


def _whatif_rows(whatif: WhatIfSummary) -> list[tuple[str, str]]:
    """One row per what-if figure: the hit ratio and its difference from the current setting's, on the same sample."""
    base = whatif.current
    errors = whatif.errors or {}

    def shown(ratio: float, figure: str, delta: bool = True) -> str:
        error = errors.get(figure, 0.0)
        spread = f" ± {error:.4f}" if error else ""
        return f"hit {ratio:.4f}{spread}" + (f" ({ratio - base:+.4f})" if delta else "")

    sampled = "exact" if whatif.sample_rate >= 1 else f"sampled at {whatif.sample_rate:g}"
    if whatif.sample_rate != whatif.requested_rate:
        sampled += f"; the config's {whatif.requested_rate:g} raised so the smallest shadow holds enough blocks"
    rows = [(f"what-if ({sampled}): current setting", shown(base, "current", delta=False))]
    rows += [
        (f"what-if: {multiple}x host memory", shown(ratio, f"capacity {multiple}"))
        for multiple, ratio in whatif.capacity.items()
    ]
    rows += [(f"what-if: policy {name}", shown(ratio, f"policy {name}")) for name, ratio in whatif.policy.items()]
    return rows


def check_verdict(verified_blocks: int) -> str:
    """The line that says the byte-for-byte check passed (a mismatch ends the run before any report)."""
    if not verified_blocks:
        return "check passed: no block was loaded from offload, so none was compared"
    return f"check passed: all {verified_blocks:,} blocks loaded from offload equal the blocks stored, byte for byte"


def run_heading(
    config: KVContractConfig, *, trace: Path | None, requests: int, seed: int, engines: int = 1
) -> list[str]:
    """What a run serves and with what: the workload (or trace), the manager and the layout."""
    workload = (
        f"trace {trace} ({requests:,} requests)"
        if trace is not None
        else f"built-in workload ({requests:,} requests, seed {seed})"
    )
    layout = config.kv_layout
    block = layout.offload_block_bytes
    manager = config.manager
    primary = config.primary
    shared = ""
    if engines > 1:
        shared = f", {engines} engines " + (
            "sharing their tiers" if _has_tiers(config) else "with their own host memory and no tier to share"
        )
    pool = f"host memory: {primary.policy.kind} eviction, {primary.capacity:,} host blocks ({size_text(primary.capacity * block)})"
    if primary.admission is not None:
        pool += f", stored once seen {primary.admission.store_threshold} times"
    tiers = [] if isinstance(manager, CPUManagerConfig) else [_tier_text(tier, block) for tier in manager.secondary]
    return [
        f"kvcontract simulate: {workload}{shared}",
        f"  {pool}" + "".join(f"; then {tier}" for tier in tiers),
        f"  layout: {layout.num_layers} layers, {layout.num_kv_heads} KV heads of {layout.head_dim}, {layout.dtype}; "
        f"{layout.block_tokens}-token GPU blocks, {layout.offload_block_tokens}-token offload blocks of {size_text(block)}"
        + ("" if layout.groups is None else f" (one group's: {', '.join(g.summary() for g in layout.groups)})"),
    ]


def _has_tiers(config: KVContractConfig) -> bool:
    return not isinstance(config.manager, CPUManagerConfig) and bool(config.manager.secondary)


def _tier_text(tier: TierConfig, block: int) -> str:
    if isinstance(tier, ExternalTierConfig):
        return f"tier {tier.kind}"
    if isinstance(tier, FileTierConfig):
        return f"file tier at {tier.path}: {tier.policy.kind} eviction, {tier.capacity:,} blocks ({size_text(tier.capacity * block)})"
    if isinstance(tier, MooncakeTierConfig):
        return f"mooncake tier at {tier.master}" + (f" (namespace {tier.namespace})" if tier.namespace else "")
    where = tier.url or ", ".join(tier.cluster_nodes)
    return f"redis tier at {where}" + (f" (namespace {tier.namespace})" if tier.namespace else "")


def require_plotting() -> None:
    """Raise ``ImportError`` naming the extra unless matplotlib, which plots need, is installed."""
    try:
        importlib.import_module("matplotlib")
    except ImportError as error:
        raise MissingExtraError(f"plots need matplotlib: pip install '{PLOT_EXTRA}'", extra="plot") from error


def write_plot(report: SimulationReport, path: Path) -> None:
    """:func:`run_figure` as a PNG."""
    figure = run_figure(report)
    import matplotlib.pyplot as plt

    try:
        with replacing(path) as temporary:
            figure.savefig(temporary, format="png")  # pyright: ignore[reportUnknownMemberType]  # matplotlib leaves **kwargs untyped
    finally:
        plt.close(figure)


def run_figure(report: SimulationReport) -> Figure:
    """Hit ratio and transfer throughput against requests served. Both axes start at 0, and the hit
    ratio's ends a little above its highest value, so neither hides nor inflates how they move."""
    require_plotting()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    served = [s.requests for s in report.samples]
    ratios = [s.hit_ratio for s in report.samples]
    figure, (hits, throughput) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    hits.plot(served, ratios)
    hits.set_ylabel("hit ratio (cumulative)")
    hits.set_ylim(0, min(1.0, math.ceil(max(ratios, default=0.0) * 1.1 * 20) / 20) or 1.0)
    throughput.plot(served, [s.transfer_gbps * 1e9 / 2**30 for s in report.samples], color="tab:orange")
    throughput.set_ylabel("transfer GiB/s (cumulative)")
    throughput.set_ylim(bottom=0)
    throughput.set_xlabel("requests served")
    for axes in (hits, throughput):
        axes.grid(True, alpha=0.3)
    hits.set_title(f"kvcontract simulate on {report.device}: {report.requests:,} requests")
    figure.tight_layout()
    return figure
