"""The plots a reader looks at: axes that span the data, and capacity labels a reader can read."""

from __future__ import annotations

from matplotlib.axes import Axes

from kvcontract.config import load_config
from kvcontract.sim.defaults import SIMULATION_DEFAULTS
from kvcontract.sim.plan_report import plan_figure
from kvcontract.sim.planner import plan_capacity
from kvcontract.sim.report import run_figure
from kvcontract.sim.run import run_simulation

REQUESTS = [[n % 5, n + 100, n + 1000] for n in range(200)]


def _labels(axes: Axes) -> list[str]:
    """The major tick labels on view along the x axis."""
    low, high = axes.get_xlim()
    return [
        label.get_text()
        for tick, label in zip(axes.get_xticks(), axes.get_xticklabels())
        if low <= tick <= high and label.get_text()
    ]


def test_the_plan_plot_s_hit_ratio_axis_ends_just_above_its_data() -> None:
    plan = plan_capacity(REQUESTS, [2, 5, 10, 20, 50, 100], ("lru",), processes=1)
    highest = max(plan.unbounded_hit_ratio, *(max(ratios) for ratios in plan.curves.values()))
    assert highest < 0.5
    figure = plan_figure(plan, target=None)
    axes = figure.axes[0]
    assert axes.get_ylim() == (0.0, (int(highest * 1.1 * 20) + 1) / 20)
    figure.draw_without_rendering()
    assert _labels(axes) == ["2", "5", "10", "20", "50", "100"]


def test_the_plan_plot_keeps_the_target_on_view() -> None:
    plan = plan_capacity(REQUESTS, [2, 100], ("lru",), processes=1)
    figure = plan_figure(plan, target=0.9)
    assert figure.axes[0].get_ylim()[1] >= 0.9


def test_the_run_plot_s_axes_start_at_zero_and_span_the_hit_ratio() -> None:
    report = run_simulation(load_config(environ={}, base=SIMULATION_DEFAULTS), num_requests=100, show_progress=False)
    hits, throughput = run_figure(report).axes[:2]
    highest = max(sample.hit_ratio for sample in report.samples)
    assert hits.get_ylim()[0] == 0 and highest < hits.get_ylim()[1] <= min(1.0, highest + 0.15)
    assert throughput.get_ylim()[0] == 0
