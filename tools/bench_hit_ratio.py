"""Hit ratio of every kvcontract policy against vLLM's own manager (the installed release) and the offline optimum, per trace shape.

Replays the shipped conversation trace and the synthetic shapes of ``trace_shapes.py``
at 2 %, 5 % and 10 % of each trace's unique blocks through the same loop
(``kvcontract.sim.replay``; its copy ``bench_manager.replay_vllm`` for vLLM): every
kvcontract policy with store threshold 1 (``CPUOffloadingManager``) and 2 (wrapped in
``FilterReusedOffloadingManager``), vLLM's ``lru`` and ``arc`` with ``store_threshold``
1 and 2, and Belady's offline optimum (``kvcontract.plan.optimum``). Prints one table per
trace and, with ``--plot PATH``, draws best kvcontract, best vLLM and the optimum per trace (needs matplotlib, extra ``plot``).

    python tools/bench_hit_ratio.py [--traces conversation,short_sessions,...] [--plot docs/images/hit_ratio.png] [--results ratios.json]
    python tools/bench_hit_ratio.py --from-results ratios.json --plot docs/images/hit_ratio.png   # redraw without measuring
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from bench_manager import BLOCK_TOKENS, DEFAULT_TRACE, replay_vllm
from rich.console import Console
from rich.table import Table
from trace_shapes import SHAPES

from kvcontract.enforce import configure
from kvcontract.managers import CPUOffloadingManager, FilterReusedOffloadingManager
from kvcontract.plan.optimum import optimal_hit_ratio
from kvcontract.sim import read_trace, replay

FRACTIONS = (0.02, 0.05, 0.10)
POLICIES = ("lru", "arc", "s3fifo", "sieve", "prefix_reuse")
VLLM_POLICIES = ("lru", "arc")
THRESHOLDS = (1, 2)


def traces(names: Sequence[str], conversation: Path) -> dict[str, list[list[int]]]:
    """The named traces as lists of hash-id chains."""
    found: dict[str, list[list[int]]] = {}
    for name in names:
        if name == "conversation":
            found[name] = [list(request.hash_ids) for request in read_trace(conversation)]
        else:
            found[name] = SHAPES[name](0)
    return found


def kvcontract_hit_ratio(requests: list[list[int]], capacity: int, policy: str, threshold: int) -> float:
    """Hit ratio of a kvcontract manager with ``policy``, storing on the ``threshold``-th offer."""
    manager = CPUOffloadingManager(capacity, policy)
    report = replay(
        manager if threshold == 1 else FilterReusedOffloadingManager(manager, store_threshold=threshold), requests
    )
    return report.hit_ratio


def vllm_hit_ratio(requests: list[list[int]], capacity: int, policy: str, threshold: int) -> float:
    """Hit ratio of vLLM's ``CPUOffloadingManager`` through the same loop."""
    from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager as VLLMManager

    from kvcontract.integrations.vllm.replay import key_chains, request_contexts

    chains = key_chains(requests)
    contexts = request_contexts(chains, block_tokens=BLOCK_TOKENS)
    manager = VLLMManager(capacity, cache_policy=policy, store_threshold=threshold)
    hit_blocks, _seconds = replay_vllm(manager, chains, contexts)
    return hit_blocks / sum(map(len, chains))


def measure(requests: list[list[int]], with_vllm: bool) -> dict[str, dict[float, float]]:
    """Every configuration's hit ratio at every capacity: {configuration: {fraction: ratio}}."""
    unique = len({hash_id for request in requests for hash_id in request})
    curves: dict[str, dict[float, float]] = {}
    for fraction in FRACTIONS:
        capacity = max(1, round(unique * fraction))
        for policy in POLICIES:
            for threshold in THRESHOLDS:
                curves.setdefault(f"kvcontract {policy} t{threshold}", {})[fraction] = kvcontract_hit_ratio(
                    requests, capacity, policy, threshold
                )
        if with_vllm:
            for policy in VLLM_POLICIES:
                for threshold in THRESHOLDS:
                    curves.setdefault(f"vLLM {policy} t{threshold}", {})[fraction] = vllm_hit_ratio(
                        requests, capacity, policy, threshold
                    )
        curves.setdefault("offline optimum", {})[fraction] = optimal_hit_ratio(requests, capacity)
    return curves


def best(curves: dict[str, dict[float, float]], prefix: str, fraction: float) -> tuple[str, float]:
    """The configuration starting with ``prefix`` with the highest hit ratio at ``fraction``."""
    name = max((name for name in curves if name.startswith(prefix)), key=lambda name: curves[name][fraction])
    return name, curves[name][fraction]


def print_table(console: Console, trace: str, requests: list[list[int]], curves: dict[str, dict[float, float]]) -> None:
    """One trace's hit ratios, the best of each side marked per capacity."""
    unique = len({hash_id for request in requests for hash_id in request})
    table = Table(title=f"{trace}: {len(requests):,} requests, {sum(map(len, requests)):,} blocks, {unique:,} unique")
    table.add_column("configuration")
    for fraction in FRACTIONS:
        table.add_column(f"{fraction:.0%}", justify="right")
    for name, curve in curves.items():
        table.add_row(name, *(f"{curve[fraction]:.4f}" for fraction in FRACTIONS))
    if any(name.startswith("vLLM") for name in curves):
        table.add_section()
        for side in ("kvcontract", "vLLM"):
            table.add_row(
                f"best {side}",
                *(
                    "{1:.4f} ({0})".format(*best(curves, side, fraction)).replace(f"{side} ", "")
                    for fraction in FRACTIONS
                ),
            )
    console.print(table)


def plot(results: dict[str, dict[str, dict[float, float]]], path: Path) -> None:
    """Hit ratio against capacity, one panel per trace: best kvcontract, best vLLM and the optimum, each point named."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("--plot needs matplotlib: pip install 'kvcontract[plot]'")
    columns = 2 if len(results) > 2 else len(results)
    rows = -(-len(results) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.6 * rows), squeeze=False)
    xs = [100 * fraction for fraction in FRACTIONS]
    styles = {
        "kvcontract": {"color": "tab:blue", "marker": "o", "linestyle": "-", "linewidth": 4, "alpha": 0.5},
        "vLLM": {"color": "tab:orange", "marker": "x", "linestyle": ":", "linewidth": 1.5, "alpha": 1.0},
    }
    for axis, (trace, curves) in zip(axes.flat, results.items()):
        sides = {
            side: [(name.removeprefix(f"{side} "), ratio) for name, ratio in (best(curves, side, f) for f in FRACTIONS)]
            for side in styles
            if any(name.startswith(side) for name in curves)
        }
        for side, points in sides.items():
            style = styles[side]
            axis.plot(xs, [ratio for _name, ratio in points], label=f"best {side}", **style)
            for index, (x, (name, ratio)) in enumerate(zip(xs, points)):
                other = sides.get("vLLM" if side == "kvcontract" else "kvcontract")
                tied = other is not None and other[index][0] == name and abs(other[index][1] - ratio) < 5e-5
                if tied and side == "vLLM":
                    continue  # one label for a point both sides reach with the same configuration
                offset = (0, 7) if side == "kvcontract" and not tied else (0, -12)  # below: the optimum lies above
                axis.annotate(
                    f"{name} (both)" if tied else name,
                    (x, ratio),
                    textcoords="offset points",
                    xytext=offset,
                    ha="center",
                    fontsize=7,
                    color=style["color"],
                )
        optimum = curves["offline optimum"]
        axis.plot(
            xs,
            [optimum[fraction] for fraction in FRACTIONS],
            color="black",
            linestyle="--",
            marker="s",
            label="offline optimum",
        )
        highest = max([*optimum.values(), *(ratio for points in sides.values() for _name, ratio in points)])
        axis.set_title(trace)
        axis.set_xticks(xs)
        axis.set_xlim(0.5, 11.5)
        axis.set_xlabel("capacity, % of unique blocks")
        axis.set_ylabel("hit ratio")
        axis.set_ylim(0, min(1.05, math.ceil(highest * 1.15 * 20) / 20))  # each panel's own range: they differ fivefold
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(results) :]:
        axis.set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(  # pyright: ignore[reportUnknownMemberType]  # matplotlib leaves **kwargs untyped
        handles, labels, loc="lower center", ncol=len(labels), fontsize=8, bbox_to_anchor=(0.5, -0.02)
    )
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90, bbox_inches="tight")  # pyright: ignore[reportUnknownMemberType]  # matplotlib leaves **kwargs untyped


def main(argv: Sequence[str] | None = None) -> None:
    """Measure and print (and plot) the hit ratios."""
    parser = argparse.ArgumentParser(description="Hit ratios of kvcontract and vLLM policies per trace shape.")
    parser.add_argument("--traces", default=",".join(["conversation", *SHAPES]), help="comma-separated trace names")
    parser.add_argument("--conversation", type=Path, default=DEFAULT_TRACE, help="the shipped conversation trace")
    parser.add_argument("--no-vllm", action="store_true", help="leave vLLM's manager out")
    parser.add_argument("--plot", type=Path, help="write the curves to this PNG")
    parser.add_argument("--results", type=Path, help="write the measured ratios to this JSON file")
    parser.add_argument("--from-results", type=Path, help="plot ratios saved by --results instead of measuring")
    options = parser.parse_args(argv)
    names = [name.strip() for name in options.traces.split(",") if name.strip()]
    unknown = sorted(set(names) - {"conversation", *SHAPES})
    if unknown:
        parser.error(f"unknown traces {unknown}; known: conversation, {', '.join(SHAPES)}")
    with_vllm = not options.no_vllm
    if with_vllm and importlib.util.find_spec("vllm") is None:  # the vLLM rows need vLLM
        sys.exit("the vLLM rows need vLLM: pip install 'kvcontract[vllm]', or pass --no-vllm")
    results: dict[str, dict[str, dict[float, float]]] = {}
    if options.from_results is not None:
        saved: dict[str, dict[str, dict[str, float]]] = json.loads(options.from_results.read_text())
        results |= {
            trace: {
                name: {float(fraction): ratio for fraction, ratio in curve.items()} for name, curve in curves.items()
            }
            for trace, curves in saved.items()
            if trace in names
        }
        plot(results, options.plot or Path("hit_ratio.png"))
        return
    configure(checks=False)
    console = Console(width=140)
    for trace, requests in traces(names, options.conversation).items():
        results[trace] = measure(requests, with_vllm)
        print_table(console, trace, requests, results[trace])
    if options.results is not None:
        options.results.write_text(json.dumps(results, indent=1) + "\n")
    if options.plot is not None:
        plot(results, options.plot)


if __name__ == "__main__":
    main()
