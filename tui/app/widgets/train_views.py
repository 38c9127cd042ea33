"""Below the Train form, one of two views (the screen's v switches them): the run's curves, one
chart at a time (tui/app/widgets/curve_chart.py), or its attention: the best head on the probe
source, live while the run trains, then the timeline of the run's probe snapshots once it ends.

The widget only draws what the screen hands it (the run's History, its Progress messages); the
keys stay on the screen (tui/app/chart_keys.py).
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import ContentSwitcher, Static

from minitx.tui.app.messages import Progress, TimelineMoved, Watching
from minitx.tui.app.widgets.attention import AttentionGrid, ScoreTable
from minitx.tui.app.widgets.curve_chart import CurveChart
from minitx.tui.app.widgets.timeline import Timeline
from minitx.tui.render.model_text import NOTHING, printable

CHART_INTERVAL = 0.5  # seconds between redraws of the live chart (a redraw takes ~10 ms)
CURVES, ATTENTION = "curves-panel", "probe-row"


class TrainViews(ContentSwitcher):
    def __init__(self) -> None:
        super().__init__(initial=CURVES, id="train-views")
        self.chart_drawn = 0.0  # when the live chart was last redrawn

    def compose(self) -> ComposeResult:
        with Vertical(id=CURVES):
            yield Static("", id="watching", markup=False)
            yield CurveChart(id="curves")
        with Horizontal(id=ATTENTION):
            with Vertical(id="probe-panel"):
                yield AttentionGrid(id="probe", compact=True)
                yield Timeline(id="timeline", compact=True)
            with Vertical(id="probe-scores-panel"):
                yield ScoreTable(id="probe-scores")

    def on_mount(self) -> None:
        probe = self.query_one("#probe-panel")
        probe.border_title = "probe · cross-attention of the best head"
        probe.border_subtitle = "rows: targets · columns: source"
        self.query_one("#probe-scores-panel").border_title = "alignment, live"
        self.query_one("#probe", AttentionGrid).show(
            [], [], [], hint="the best head on the probe source, live")
        self.timeline.display = False
        self.query_one("#watching").display = False  # a fine-tune's probes and forgetting
        self.chart.show_runs([], note="press space to train: its curves draw here as it runs")

    @property
    def chart(self) -> CurveChart:
        return self.query_one(CurveChart)

    @property
    def timeline(self) -> Timeline:
        return self.query_one(Timeline)

    # -- which view --------------------------------------------------------------------------------
    @property
    def charts_shown(self) -> bool:
        return self.current == CURVES

    @property
    def timeline_shown(self) -> bool:
        return not self.charts_shown and self.timeline.display

    def switch(self) -> None:
        self.current = ATTENTION if self.charts_shown else CURVES

    # -- a run -------------------------------------------------------------------------------------
    def new_run(self) -> None:
        """A run is starting: no curves yet, and the live probe in place of the last timeline."""
        self.chart.x_end = None
        self.chart.show_runs([], note="starting…")
        self.query_one(f"#{CURVES}").border_subtitle = ""
        self.query_one("#watching").display = False
        self.show_timeline(None)

    def run_started(self, label: str, history) -> None:
        self.chart.show_runs([(label, history)])  # the run's own History, drawn as it grows
        self.chart.parent.border_title = self.chart.describe()  # a resumed fine-tune opens on BLEU


    def progress(self, message: Progress) -> None:
        self.chart.x_end = message.total  # while it trains, the x axis spans the run as planned
        now = time.monotonic()
        if now - self.chart_drawn >= CHART_INTERVAL or message.step == message.total:
            # Without layout: the chart's size is fixed by the screen, and a layout pass of the
            # whole screen ten times a second took the GIL from training often enough to cost ~10%.
            self.chart.refresh()
            self.chart_drawn = now
            # What the status line has no room for at 80 columns (a fine-tune's held-out loss and
            # exact match: its BLEU and chrF take their place there).
            held_out = f"held-out {message.heldout_loss} · {message.accuracy} · " \
                if message.heldout_loss else ""
            self.query_one(f"#{CURVES}").border_subtitle = (
                f"{held_out}lr {message.lr:.1e} · grad norm {message.grad_norm:.2f}")
        if message.probe:
            p = message.probe
            layer, head = p.best
            self.query_one("#probe-panel").border_title = (
                f"probe {p.source_text} · L{layer + 1} H{head + 1}, live")
            self.query_one("#probe", AttentionGrid).show(p.rows, p.source, p.targets)
            self.query_one("#probe-scores-panel").border_title = f"{p.measure}, live"
            self.query_one("#probe-scores", ScoreTable).show(p.scores, (layer, head),
                                                            note="best head in brackets")

    def watching(self, message: Watching) -> None:
        """A fine-tune's probes at its latest evaluation, changed words marked against its base's
        output, then the KL to the base and the general loss, or the forgetting alarm in red."""
        watch = self.query_one("#watching", Static)
        watch.update(watching_text(message))
        watch.display = True

    def run_ended(self, history, task, tall: bool) -> None:
        """The run as it ran; a fine-tune's probe lines stay where the screen is `tall` enough
        for them beside the form (h in Explore replays them)."""
        if not tall:
            self.query_one("#watching").display = False
        self.chart.x_end = None  # the run as it ran (--until may have ended it early)
        self.chart.refresh()
        self.show_timeline(history, task)

    def show_timeline(self, history, task=None) -> None:
        """After a run (a history): its snapshots in place of the live probe; None brings the
        live probe back."""
        shown = history is not None
        self.query_one("#probe", AttentionGrid).display = not shown
        self.timeline.display = shown
        panel, scores = self.query_one("#probe-panel"), self.query_one("#probe-scores-panel")
        if shown:
            self.timeline.show_history(history, task)
            panel.border_title = self.timeline.title_line()
            panel.border_subtitle = self.timeline.position_line()
            # Scores step with the timeline where the task expects a pattern; else the run's last.
            scores.border_title = "alignment, then" if self.timeline.scores else "sharpness, at the end"
        else:
            self.timeline.pause()
            panel.border_subtitle = "rows: targets · columns: source"
            scores.border_title = "alignment, live"

    def on_timeline_moved(self, message: TimelineMoved) -> None:
        message.stop()
        timeline = self.timeline
        if timeline.display:
            panel = self.query_one("#probe-panel")
            panel.border_subtitle = timeline.position_line()
            panel.border_title = timeline.title_line()
        if timeline.scores:
            layer, head = timeline.head
            self.query_one("#probe-scores", ScoreTable).show(
                timeline.scores[timeline.index], timeline.head,
                note=f"L{layer + 1} H{head + 1} at step {timeline.step}")


def watching_text(message: Watching) -> Text:
    """'the cat → die [Katze]' a probe a line (changed words bold and reversed: visible without
    colour), and one line of forgetting: 'KL to base 0.042 (on the probes)', the general loss
    base → now, or the alarm ('forgetting: general-domain loss 1.92 -> 2.61 (+36%) at step 400')."""
    text = Text(no_wrap=True, overflow="ellipsis")
    for probe in message.probes:
        text.append(f"{printable(probe.source)} → ", style="dim")
        words = probe.output.split()
        if not words:
            text.append(NOTHING, style="dim")
        for i, word in enumerate(words):
            text.append(" " if i else "")
            text.append(printable(word), style="bold reverse" if i in probe.changed else "")
        text.append("\n")
    if message.alarm:
        text.append(f"⚠ {message.alarm}", style="bold red")
        return text
    parts = []
    if message.kl_to_base is not None:
        on = "general pairs" if message.kl_on == "general" else "probes"
        parts.append(f"KL to base {message.kl_to_base:.3g} (on the {on})")
    if message.general_loss is not None:
        base, now = message.general_loss
        parts.append(f"general loss {base:.3g}→{now:.3g}")
    text.append(" · ".join(parts) or f"step {message.step}", style="dim")
    return text
