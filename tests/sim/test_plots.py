"""The run plot a reader looks at: axes that start at zero and span the data."""

from __future__ import annotations

from kvcontract.config import load_config
from kvcontract.sim.defaults import SIMULATION_DEFAULTS
from kvcontract.sim.report import run_figure
from kvcontract.sim.run import run_simulation


def test_the_run_plot_s_axes_start_at_zero_and_span_the_hit_ratio() -> None:
    report = run_simulation(load_config(environ={}, base=SIMULATION_DEFAULTS), num_requests=100, show_progress=False)
    hits, throughput = run_figure(report).axes[:2]
    highest = max(sample.hit_ratio for sample in report.samples)
    assert hits.get_ylim()[0] == 0 and highest < hits.get_ylim()[1] <= min(1.0, highest + 0.15)
    assert throughput.get_ylim()[0] == 0
