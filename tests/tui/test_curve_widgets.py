"""The chart and timeline widgets on their own: snapshots at 80x24 and 100x32, cycling and
toggles, two runs overlaid, the timeline stepping and playing through snapshots in order, and
files without history showing no curves.

The histories are built by rule (no training), so every picture is the same on every machine.
Regenerate the pictures with `pytest tests/tui/test_curve_widgets.py --snapshot-update` after
a deliberate change.
"""

from __future__ import annotations

import math

import pytest
import torch
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical

from minitx.core.data.tasks import get_task
from minitx.core.history import History
from minitx.tui.app.widgets.curve_chart import CurveChart
from minitx.tui.app.widgets.timeline import Timeline


def made_history(steps: int = 600, speed: float = 1.0, snapshots: int = 0) -> History:
    """A run by rule: loss falling over three decades with a ripple, warmup then cosine lr,
    evaluations every 50 steps; with snapshots, reverse attention sharpening onto the
    anti-diagonal of a six-digit source."""
    history = History()
    for s in range(1, steps + 1):
        loss = 2.5 * math.exp(-speed * s / 60) + 0.002 + 0.01 * (1 + math.sin(s / 3)) * math.exp(-s / 300)
        lr = 1e-3 * min(1.0, s / 50) * (0.1 + 0.45 * (1 + math.cos(math.pi * s / steps)))
        history.record_step(s, loss, lr, 0.3 + 1.5 * math.exp(-s / 100), 5000.0, s * 0.02)
        if s % 50 == 0:
            history.record_eval(s, min(1.0, 1 / (1 + math.exp(-(speed * s - 200) / 40))))
    source, target = [7, 2, 9, 0, 4, 6], [6, 4, 0, 9, 2, 7, 12]
    for k in range(snapshots):
        step = round(k * steps / (snapshots - 1))
        sharp = k / (snapshots - 1)
        rows = torch.full((7, 6), 1 / 6)
        for i in range(6):
            rows[i] = (1 - sharp) / 6
            rows[i, 5 - i] += sharp
        attention = torch.stack([torch.stack([rows, torch.full((7, 6), 1 / 6)])])  # (1, 2, 7, 6)
        history.record_snapshot(step, source, target, attention)
    return history


class ChartApp(App):
    CSS = "#box { border: round $primary; height: 1fr; }"
    BINDINGS = [Binding("g", "cycle", "chart"), Binding("l", "log", "log/linear"),
                Binding("m", "smooth", "smooth"), Binding("t", "x", "x axis")]

    def __init__(self, runs) -> None:
        super().__init__()
        self.runs = runs

    def compose(self) -> ComposeResult:
        with Vertical(id="box"):
            yield CurveChart(id="chart")

    def on_mount(self) -> None:
        chart = self.query_one(CurveChart)
        chart.show_runs(self.runs)
        self.query_one("#box").border_title = chart.describe()

    def _after(self, change) -> None:
        chart = self.query_one(CurveChart)
        change(chart)
        self.query_one("#box").border_title = chart.describe()

    def action_cycle(self) -> None:
        self._after(lambda c: c.cycle())

    def action_log(self) -> None:
        self._after(lambda c: c.toggle_log())

    def action_smooth(self) -> None:
        self._after(lambda c: c.toggle_smoothing())

    def action_x(self) -> None:
        self._after(lambda c: c.toggle_x_axis())


class TimelineApp(App):
    BINDINGS = [Binding("comma", "back", "back"), Binding("full_stop", "forward", "forward"),
                Binding("p", "play", "play")]

    def __init__(self, history) -> None:
        super().__init__()
        self.history = history

    def compose(self) -> ComposeResult:
        yield Timeline()

    def on_mount(self) -> None:
        self.query_one(Timeline).show_history(self.history, get_task("reverse"))

    def action_back(self) -> None:
        self.query_one(Timeline).step_by(-1)

    def action_forward(self) -> None:
        self.query_one(Timeline).step_by(1)

    def action_play(self) -> None:
        self.query_one(Timeline).toggle_play()


TWO_RUNS = [("run A", made_history()), ("run B", made_history(speed=0.6))]


def test_two_runs_loss_log_scale_at_80x24(snap_compare):
    assert snap_compare(ChartApp(TWO_RUNS), terminal_size=(80, 24))


def test_two_runs_loss_log_scale_at_100x32(snap_compare):
    assert snap_compare(ChartApp(TWO_RUNS), terminal_size=(100, 32))


def test_one_run_accuracy_at_80x24(snap_compare):
    async def run_before(pilot):
        await pilot.press("g")

    assert snap_compare(ChartApp(TWO_RUNS[:1]), terminal_size=(80, 24), run_before=run_before)


@pytest.mark.slow  # tier 2: a picture; the timeline's steps are tier 1's
def test_timeline_midway_at_80x24(snap_compare):
    async def run_before(pilot):
        await pilot.press(*["comma"] * 5)

    assert snap_compare(TimelineApp(made_history(snapshots=11)), terminal_size=(80, 24),
                        run_before=run_before)


@pytest.mark.asyncio
async def test_keys_cycle_the_chart_and_toggle_scale_smoothing_and_x_axis():
    app = ChartApp(TWO_RUNS[:1])
    async with app.run_test(size=(80, 24)) as pilot:
        chart = app.query_one(CurveChart)
        assert chart.describe() == "loss · log · by step"
        seen = []
        for _ in range(4):
            await pilot.press("g")
            seen.append(chart.chart)
        assert seen == ["accuracy", "lr", "grad_norm", "loss"]
        raw = chart.render().plain
        await pilot.press("l", "m", "t")
        assert chart.describe() == "loss · linear · smoothed · by training time"
        assert chart.render().plain != raw
        assert chart.render().plain.splitlines()[-1].startswith("time 0s")  # time ticks: 0s, 2s, ...


@pytest.mark.asyncio
async def test_a_chart_overlays_two_runs_with_a_legend_and_a_marker_each():
    app = ChartApp(TWO_RUNS)
    async with app.run_test(size=(80, 24)):
        text = app.query_one(CurveChart).render().plain
        heading = text.splitlines()[0]
        assert "run A" in heading and "run B" in heading
        assert "⣿" in heading and "▀" in heading  # braille for A, half blocks for B
        body = "\n".join(text.splitlines()[1:])
        assert any(ch in body for ch in "⠁⠂⠄⡀⠈⠐⠠⢀") and any(ch in body for ch in "▀▄▖▗▘▝")


@pytest.mark.asyncio
async def test_runs_without_history_show_no_curves_and_say_so():
    app = ChartApp([("old", None), ("exported", History())])
    async with app.run_test(size=(80, 24)):
        chart = app.query_one(CurveChart)
        assert "no curves" in chart.render().plain


@pytest.mark.asyncio
async def test_the_timeline_steps_back_and_forward_through_snapshots_in_order():
    history = made_history(snapshots=11)
    app = TimelineApp(history)
    async with app.run_test(size=(80, 24)) as pilot:
        timeline = app.query_one(Timeline)
        assert timeline.step == 600 and timeline.head == (0, 0)  # the head that aligns at the end
        seen = [timeline.step]
        for _ in range(12):  # past the first snapshot: it stays there
            await pilot.press("comma")
            seen.append(timeline.step)
        assert seen[:11] == sorted(history.snapshot_steps, reverse=True) and seen[11:] == [0, 0]
        first_grid = app.query_one("#timeline-grid").rows
        await pilot.press("full_stop")
        assert timeline.step == history.snapshot_steps[1]
        assert app.query_one("#timeline-grid").rows != first_grid
        assert timeline.scores[-1][0][0] > 0.99 > timeline.scores[0][0][0]  # it formed


@pytest.mark.asyncio
async def test_play_runs_through_every_snapshot_in_order_and_stops_at_the_end():
    history = made_history(snapshots=6)
    app = TimelineApp(history)
    async with app.run_test(size=(80, 24)) as pilot:
        timeline = app.query_one(Timeline)
        await pilot.press("p")  # at the end: play starts from the first snapshot
        seen = [timeline.step]
        while timeline.playing:
            await pilot.pause(0.02)
            if timeline.step != seen[-1]:
                seen.append(timeline.step)
        assert seen == history.snapshot_steps
        assert "playing" not in timeline.bar().plain


@pytest.mark.asyncio
async def test_a_history_without_snapshots_shows_a_note_not_a_grid():
    app = TimelineApp(made_history(snapshots=0))
    async with app.run_test(size=(80, 24)) as pilot:
        timeline = app.query_one(Timeline)
        await pilot.press("full_stop", "p")
        assert timeline.step is None and not timeline.playing
        assert "no snapshots" in timeline.bar().plain
