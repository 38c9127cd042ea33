"""Keys for the curve chart and the snapshot timeline, shared by the screens that show them
(charts: Train and Compare; timeline: Train and Explore).

A screen mixes in ChartKeys and/or TimelineKeys, adds their bindings, and says when each set
applies (charts_shown(), timeline_shown()); keys that do not apply are hidden from the footer.
"""

from __future__ import annotations

from textual.binding import Binding

from minitx.tui.app.errors import one_line_errors
from minitx.tui.app.widgets.curve_chart import CurveChart
from minitx.tui.app.widgets.timeline import Timeline
from minitx.tui.render.charts import CHARTS

CHART_BINDINGS = [
    Binding("g", "chart('cycle')", "next chart", tooltip="next chart: loss, accuracy, lr, grad norm"),
    Binding("l", "chart('toggle_log')", "log/linear", tooltip="log or linear scale"),
    Binding("m", "chart('toggle_smoothing')", "smooth", tooltip="smoothing on/off"),
    Binding("k", "chart('toggle_x_axis')", "x: step/time", tooltip="x axis: step or time"),
]
CHART_CHANGES = ("cycle", "toggle_log", "toggle_smoothing", "toggle_x_axis")  # CurveChart methods
CHART_ACTIONS = {"chart"}
# ← and → step through the snapshots
TIMELINE_BINDINGS = [Binding("p", "play", "play", tooltip="play the snapshots")]
TIMELINE_ACTIONS = {"play"}


class ChartKeys:
    """Mixed into a Screen with one CurveChart inside a bordered box that names the chart."""

    def charts_shown(self) -> bool:
        return True

    def curve_chart(self) -> CurveChart:
        return self.query_one(CurveChart)

    def describe_chart(self) -> None:
        chart = self.curve_chart()
        chart.parent.border_title = chart.describe()

    def check_chart_action(self, action: str, parameters: tuple = ()) -> bool | None:
        """None for actions that are not the chart's; else whether they apply now (l only on a
        chart with a log scale, m not on accuracy, which is never smoothed)."""
        if action not in CHART_ACTIONS:
            return None
        if not self.charts_shown():
            return False
        chart = self.curve_chart().chart
        if parameters == ("toggle_log",):
            return CHARTS[chart][1]
        return parameters != ("toggle_smoothing",) or chart != "accuracy"

    @one_line_errors
    def action_chart(self, change: str) -> None:
        if change in CHART_CHANGES:
            getattr(self.curve_chart(), change)()
            self.describe_chart()
            self.refresh_bindings()  # the next chart may offer other keys


class TimelineKeys:
    """Mixed into a Screen with one Timeline; its ← → step through snapshots while it is shown."""

    def timeline(self) -> Timeline:
        return self.query_one(Timeline)

    def timeline_shown(self) -> bool:
        return False

    def check_timeline_action(self, action: str) -> bool | None:
        if action in TIMELINE_ACTIONS:
            return self.timeline_shown() and len(self.timeline().steps) > 1
        return None

    @one_line_errors
    def action_play(self) -> None:
        self.timeline().toggle_play()
