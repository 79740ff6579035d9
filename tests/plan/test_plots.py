"""The plan plot a reader looks at: axes that span the data, and capacity labels a reader can read."""

from __future__ import annotations

from matplotlib.axes import Axes

from kvcontract.plan.planner import plan_capacity
from kvcontract.plan.report import plan_figure

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
