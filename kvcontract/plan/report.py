"""Showing a capacity plan: a table on the terminal, a JSON document, and a plot of the curves."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray
from rich.console import Console

from kvcontract.plan.planner import OPTIMUM, CapacityPlan
from kvcontract.plan.tier_plan import HOST, TierPlan
from kvcontract.sim.output import replacing, show_line, show_table, size_text
from kvcontract.sim.report import require_plotting

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plan_figure", "plan_json", "print_plan", "print_tier_plan", "tier_plan_json", "write_plan_plot"]


def print_plan(
    plan: CapacityPlan, *, block_bytes: int | None, target: float | None, console: Console | None = None
) -> None:
    """Hit ratio of each policy and the optimum at each capacity, and where each reaches ``target``."""
    names = list(plan.curves)
    title = f"kvcontract plan: {plan.requests:,} requests, {plan.blocks:,} blocks, {plan.unique_blocks:,} unique"
    columns = ["capacity (blocks)", "of unique", *(["bytes"] if block_bytes is not None else []), *names]
    rows = [
        (
            f"{capacity:,}",
            f"{capacity / plan.unique_blocks:.1%}",
            *([size_text(capacity * block_bytes)] if block_bytes is not None else []),
            *(f"{plan.curves[name][index]:.4f}" for name in names),
        )
        for index, capacity in enumerate(plan.capacities)
    ]
    out = console or Console()
    show_table(title, columns, rows, left=(), console=out)
    if plan.sample_rate is not None:
        show_line(
            f"lru: mean of SHARDS samples at {plan.sample_rate:.2%}, standard error up to {plan.sampling_error:.4f} "
            "(the largest error over a whole grid can reach about 4 times that)",
            out,
        )
    if plan.capacities[0] < plan.longest_request:
        show_line(
            f"below {plan.longest_request} blocks (the longest request) lru's one-pass curve is not exact: "
            "such a request cannot be stored whole",
            out,
        )
    if target is not None:
        for name in names:
            reached = plan.smallest_capacity(name, target)
            answer = "not reached on this grid" if reached is None else _capacity(reached, block_bytes)
            show_line(f"{name} reaches hit ratio {target}: {answer}", out)


def plan_json(plan: CapacityPlan, *, block_bytes: int | None, target: float | None) -> dict[str, object]:
    """The plan as a JSON-ready document: the grid, each curve and, with a target, where it is reached."""
    document: dict[str, object] = {
        "requests": plan.requests,
        "blocks": plan.blocks,
        "unique_blocks": plan.unique_blocks,
        "longest_request": plan.longest_request,
        "unbounded_hit_ratio": plan.unbounded_hit_ratio,
        "block_bytes": block_bytes,
        "capacities": list(plan.capacities),
        "curves": {name: list(ratios) for name, ratios in plan.curves.items()},
        "sample_rate": plan.sample_rate,
        "sampling_error": plan.sampling_error,
    }
    if target is not None:
        document["target_hit_ratio"] = target
        document["smallest_capacity"] = {name: plan.smallest_capacity(name, target) for name in plan.curves}
    return document


def print_tier_plan(plan: TierPlan, *, block_bytes: int | None, console: Console | None = None) -> None:
    """The hit ratio each level serves at each host capacity, and with a block size the bytes each tier reads."""
    sizes = ", ".join(f"{name} {_capacity(blocks, block_bytes)}" for name, blocks in plan.tier_capacities.items())
    columns = [
        "host (blocks)",
        *(["host bytes"] if block_bytes is not None else []),
        *plan.levels,
        "total",
        *([f"read from {name}" for name in plan.tier_capacities] if block_bytes is not None else []),
    ]
    rows = [
        (
            f"{capacity:,}",
            *([size_text(capacity * block_bytes)] if block_bytes is not None else []),
            *(f"{plan.hit_ratios[level][index]:.4f}" for level in plan.levels),
            f"{plan.total(index):.4f}",
            *(
                [
                    size_text(round(plan.hit_ratios[name][index] * plan.blocks) * block_bytes)
                    for name in plan.tier_capacities
                ]
                if block_bytes is not None
                else []
            ),
        )
        for index, capacity in enumerate(plan.capacities)
    ]
    show_table(f"split by tier ({sizes}; LRU in every level)", columns, rows, left=(), console=console)


def tier_plan_json(plan: TierPlan, *, block_bytes: int | None) -> dict[str, object]:
    """The split by tier as a JSON-ready document: tier sizes, and each level's hit ratio per host capacity."""
    return {
        "levels": list(plan.levels),
        "tier_capacities": dict(plan.tier_capacities),
        "tier_bytes": {name: blocks * block_bytes for name, blocks in plan.tier_capacities.items()}
        if block_bytes
        else None,
        "host_capacities": list(plan.capacities),
        "hit_ratios": {level: list(ratios) for level, ratios in plan.hit_ratios.items()},
        "total_hit_ratios": [plan.total(index) for index in range(len(plan.capacities))],
        "bytes_read": {
            level: [round(ratio * plan.blocks) * block_bytes for ratio in plan.hit_ratios[level]]
            for level in plan.levels
            if level != HOST
        }
        if block_bytes
        else None,
    }


def write_plan_plot(plan: CapacityPlan, path: Path, *, target: float | None) -> None:
    """:func:`plan_figure` as a PNG."""
    figure = plan_figure(plan, target=target)
    import matplotlib.pyplot as plt

    try:
        with replacing(path) as temporary:
            figure.savefig(temporary, format="png")  # pyright: ignore[reportUnknownMemberType]  # matplotlib leaves **kwargs untyped
    finally:
        plt.close(figure)


def plan_figure(plan: CapacityPlan, *, target: float | None) -> Figure:
    """Each policy's curve, the optimum dashed above them, the ceiling of keeping every block and
    the target as lines. The hit-ratio axis ends a little above the highest of them, not at 1,
    so the curves fill the plot; capacities are labelled at 1, 2 and 5 of each decade, in blocks
    below and in percent of the unique blocks above."""
    require_plotting()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    figure, grid = plt.subplots(1, 1, figsize=(8, 5), squeeze=False)
    axes = grid[0, 0]
    for name, ratios in plan.curves.items():
        dashed = name == OPTIMUM
        axes.plot(plan.capacities, ratios, "k--" if dashed else "-", label=name)
    axes.axhline(plan.unbounded_hit_ratio, color="tab:gray", linestyle=":", linewidth=1, label="room for every block")
    if target is not None:
        axes.axhline(target, color="tab:red", linewidth=0.8, label=f"target {target}")
    highest = max([plan.unbounded_hit_ratio, *(target or 0.0,), *(max(ratios) for ratios in plan.curves.values())])
    axes.set_ylim(0, min(1.0, math.ceil(highest * 1.1 * 20) / 20))
    axes.set_xscale("log")
    axes.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axes.xaxis.set_major_formatter(FuncFormatter(_blocks_label))
    axes.xaxis.set_minor_formatter(NullFormatter())
    unique = plan.unique_blocks

    def to_percent(blocks: NDArray[np.float64]) -> NDArray[np.float64]:
        return blocks / unique * 100

    def to_blocks(percent: NDArray[np.float64]) -> NDArray[np.float64]:
        return percent * unique / 100

    top = axes.secondary_xaxis("top", functions=(to_percent, to_blocks))
    top.set_xlabel("capacity (% of unique blocks)")
    top.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    top.xaxis.set_major_formatter(FuncFormatter(_percent_label))
    top.xaxis.set_minor_formatter(NullFormatter())
    axes.set_xlabel("capacity (offload blocks)")
    axes.set_ylabel("prefix hit ratio")
    axes.grid(True, which="major", alpha=0.3)
    axes.legend()
    axes.set_title(f"kvcontract plan: {plan.requests:,} requests, {plan.unique_blocks:,} unique blocks")
    figure.tight_layout()
    return figure


def _blocks_label(value: float, position: int | None) -> str:
    return f"{value:,.0f}"


def _percent_label(value: float, position: int | None) -> str:
    return f"{value:g}%"


def _capacity(blocks: int, block_bytes: int | None) -> str:
    return f"{blocks:,} blocks" + (f" ({size_text(blocks * block_bytes)})" if block_bytes is not None else "")
