"""Keys for the curve chart and the snapshot timeline, shared by the screens that show them
(charts: Train and Compare; timeline: Train and Explore).

A screen mixes in ChartKeys and/or TimelineKeys, adds their bindings, and says when each set
applies (charts_shown(), timeline_shown()); a key that does not apply is off the footer, and says
why when pressed (chart_why_not, timeline_why_not: tui/app/key_reasons.py).
"""

from __future__ import annotations

from textual.binding import Binding

from minitx.tui.app.errors import one_line_errors
from minitx.tui.app.widgets.curve_chart import CurveChart
from minitx.tui.app.widgets.timeline import Timeline
from minitx.tui.render.charts import CHARTS, EVALUATION_CHARTS, TABLE_CHARTS

CHART_BINDINGS = [
    Binding("g", "chart('cycle')", "next chart",
            tooltip="next chart: loss, BLEU, chrF, accuracy, lr, grad norm, watching"),
    Binding("l", "chart('toggle_log')", "log/linear", tooltip="log or linear scale"),
    Binding("m", "chart('toggle_smoothing')", "smooth", tooltip="smoothing on/off"),
    Binding("k", "chart('toggle_x_axis')", "x: step/time", tooltip="x axis: step or time"),
]
CHART_CHANGES = ("cycle", "toggle_log", "toggle_smoothing", "toggle_x_axis")  # CurveChart methods
CHART_ACTIONS = {"chart"}
# ← and → step through the snapshots (each screen binds them: Explore's step keys, Train's own)
TIMELINE_BINDINGS = [Binding("p", "play", "play", tooltip="play the snapshots")]
# Where no decoding keys do it (Train): the first and last snapshot, and the head shown.
TIMELINE_EDGE_BINDINGS = [
    Binding("home", "snapshot(0)", "first", show=False, tooltip="first / last snapshot"),
    Binding("end", "snapshot(-1)", "last", show=False, tooltip="first / last snapshot"),
]
TIMELINE_HEAD_BINDINGS = [
    Binding("left_square_bracket", "timeline_head(-1, 0)", "layer", tooltip="layer of the head shown"),
    Binding("right_square_bracket", "timeline_head(1, 0)", "layer", tooltip="layer of the head shown"),
    Binding("comma", "timeline_head(0, -1)", "head", tooltip="head shown"),
    Binding("full_stop", "timeline_head(0, 1)", "head", tooltip="head shown"),
]
TIMELINE_ACTIONS = {"play", "snapshot", "timeline_head"}


class ChartKeys:
    """Mixed into a Screen with one CurveChart inside a bordered box that names the chart."""

    def charts_shown(self) -> bool:
        return True

    def curve_chart(self) -> CurveChart:
        return self.query_one(CurveChart)

    def describe_chart(self) -> None:
        chart = self.curve_chart()
        chart.parent.border_title = chart.describe()

    def chart_why_not(self, parameters: tuple = ()) -> str | None:
        """Why a chart key does nothing now (l only on a chart with a log scale, m not on
        accuracy, which is never smoothed), or None."""
        if not self.charts_shown():
            return "g l m k change the curves: v shows them"
        chart = self.curve_chart().chart
        if parameters == ("toggle_log",) and not CHARTS[chart][1]:
            return f"the {chart} chart has no log scale: g shows the next chart"
        if parameters != ("cycle",) and chart in TABLE_CHARTS:
            return f"the {chart} chart is a table of the evaluations: g shows the next chart"
        if parameters == ("toggle_smoothing",) and chart in EVALUATION_CHARTS:
            return f"{CHARTS[chart][0]} is never smoothed: each point is one evaluation"
        return None

    @one_line_errors
    def action_chart(self, change: str) -> None:
        if change in CHART_CHANGES:
            getattr(self.curve_chart(), change)()
            self.describe_chart()
            self.refresh_bindings()  # the next chart may offer other keys


class TimelineKeys:
    """Mixed into a Screen with one Timeline; its ← → step through snapshots while it is shown."""

    TIMELINE_HINT = "they are not shown"  # how to show them, where they are not

    def timeline(self) -> Timeline:
        return self.query_one(Timeline)

    def timeline_shown(self) -> bool:
        return False

    def timeline_why_not(self, action: str) -> str | None:
        """Why a key of the snapshots (play, first/last, the head shown) does nothing now, or None."""
        if not self.timeline_shown():
            return f"that key moves through the training snapshots: {self.TIMELINE_HINT}"
        count = len(self.timeline().steps)
        if not count:
            return "no training snapshots here"
        if count < 2 and action != "timeline_head":
            return "one snapshot only: nothing to move through or play"
        return None

    def step_timeline(self, delta: int) -> None:
        """← →: a snapshot back or on; at either end, a line says so."""
        timeline = self.timeline()
        if not timeline.step_by(delta):
            where = "first" if delta < 0 else "last"
            self.notify(f"the {where} snapshot (step {timeline.step}): "
                        f"{'→ goes on' if delta < 0 else '← goes back, p plays from the start'}", timeout=3)

    @one_line_errors
    def action_play(self) -> None:
        self.timeline().toggle_play()

    @one_line_errors
    def action_snapshot(self, index: int) -> None:
        timeline = self.timeline()
        timeline.go_to(index % max(1, len(timeline.steps)))

    @one_line_errors
    def action_timeline_head(self, layers: int, heads: int) -> None:
        self.timeline().move_head(layers, heads)
