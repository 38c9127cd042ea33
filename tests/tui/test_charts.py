"""The chart renderer that `minitx curves` and the app share (tui/render/charts.py): what a reader
of an 80x24 chart relies on — a trend instead of noise, labels on rows apart, the whole run on
the x axis, and every mark explained by the legend."""

from __future__ import annotations

from minitx.core.history import History
from minitx.tui.render.charts import Curve, chart_text, curve_of

BRAILLE = range(0x2801, 0x2900)


def plot_rows(text: str) -> list[str]:
    lines = text.splitlines()
    return [line for line in lines if "┤" in line or "│" in line]


def test_a_loss_that_jumps_every_step_draws_its_trend_not_a_fence_of_strokes():
    # 2,000 steps alternating between 0.1 and 1: a raw line would stroke over all 17 rows in
    # every column; a dot per 13 or 14 steps, each their mean, is a band of a row or so.
    steps = list(range(1, 2001))
    curve = Curve("noisy", [float(s) for s in steps], [0.1 if s % 2 else 1.0 for s in steps])
    text = chart_text([curve], "loss", 80, 20, log=True).plain
    rows_with_dots = [i for i, row in enumerate(plot_rows(text)) if any(ord(c) in BRAILLE for c in row)]
    assert len(plot_rows(text)) == 17 and len(rows_with_dots) <= 3
    assert "a dot: mean over 13 steps" in text.splitlines()[0]  # 1,999 steps over 150 dots across


def test_y_labels_never_sit_on_neighbouring_rows_and_x_labels_span_the_run():
    history = History()
    for step in range(1, 851):
        history.record_step(step, 3.3 * 0.99**step, 1e-3, 1.0, 100.0, step * 0.1)
    for rows in (4, 6, 9, 18):
        text = chart_text([curve_of("run", history, "loss")], "loss", 80, rows + 3, log=True).plain
        labelled = [i for i, row in enumerate(plot_rows(text)) if "┤" in row]
        assert len(labelled) >= 2
        if rows >= 6:
            assert all(b - a >= 2 for a, b in zip(labelled, labelled[1:])), text
        ticks = text.splitlines()[-1].split()
        assert ticks[:2] == ["step", "1"] and ticks[-1] == "850"


def test_evaluations_span_the_run_and_rough_ones_are_circles_the_legend_explains():
    history = History()
    for step in range(1, 301):
        history.record_step(step, 1.0, 1e-3, 1.0, 100.0, step * 0.1)
    history.record_eval(100, 0.95, n=50, complete=False)
    history.record_eval(200, 0.40, n=500, complete=True)
    history.record_eval(300, 0.60, n=500, complete=True)
    text = chart_text([curve_of("run", history, "accuracy")], "accuracy", 80, 14).plain
    legend, *_, ticks = text.splitlines()
    assert "○ stopped early (rough)" in legend and "● evaluation" in legend
    assert text.count("○") == 2 and text.count("●") == 3  # one rough, two complete; each in the legend
    assert ticks.split()[:2] == ["step", "1"] and ticks.split()[-1] == "300"  # the run, not 100-300


def test_a_live_run_draws_on_an_axis_reaching_its_planned_last_step():
    curve = Curve("live", [1.0, 2.0, 3.0], [2.5, 2.4, 2.2])
    text = chart_text([curve], "loss", 80, 10, log=True, x_end=900).plain
    assert text.splitlines()[-1].split()[-1] == "900"
    dotted = [row.index(c) for row in plot_rows(text) for c in row if ord(c) in BRAILLE]
    assert max(dotted) < 10  # three steps of 900 sit at the left edge


def test_overlaid_runs_keep_their_marks_and_the_legend_moves_down_when_it_does_not_fit():
    a = Curve("a-long-run-name", [1.0, 50.0, 100.0], [1.0, 0.5, 0.1])
    b = Curve("another-long-run-name", [1.0, 50.0, 100.0], [2.0, 1.0, 0.5])
    text = chart_text([a, b], "loss", 60, plot_rows=6, log=True).plain
    title, legend = text.splitlines()[:2]
    assert title == "loss · log scale" and "⣿ a-long-run-name" in legend and "▀ another" in legend
    assert len(plot_rows(text)) == 6
    assert all(len(line) <= 60 for line in text.splitlines())


def test_a_thinned_or_very_long_history_says_how_many_steps_a_dot_covers():
    sparse = History()  # a file keeps at most 2,000 points: here one every 3 steps of 3,001
    for step in range(1, 3002, 3):
        sparse.record_step(step, 1.0 / step, 1e-3, 1.0, 100.0, step * 0.1)
    text = chart_text([curve_of("run", sparse, "loss")], "loss", 80, 12, log=True).plain
    assert "a dot: mean over 20 steps" in text.splitlines()[0]  # 3,000 steps over 150 dots across
    long = History()
    for step in range(1, 100_001):
        long.record_step(step, 1.0 / step, 1e-3, 1.0, 100.0, step * 0.1)
    steps, _ = long.series("loss", at_most=4000)
    assert len(steps) == 4000 and steps[0] == 1 and steps[-1] == 100_000
    text = chart_text([curve_of("run", long, "loss")], "loss", 80, 12, log=True).plain
    assert "a dot: mean over 671 steps" in text.splitlines()[0]
