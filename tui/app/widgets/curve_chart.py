"""One chart of training curves at a time (loss, held-out accuracy, lr, grad norm), for one run or
several overlaid; the screen binds keys to cycle the chart and toggle scale, smoothing and x axis.

The widget draws histories (core.history.History, live or from files) through tui/render/charts.py, the
code `minitx curves` draws with too. It keeps no copy of the numbers: a live run's history grows
between two refreshes, and the next render shows it.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from minitx.tui.render.charts import CHARTS, X_AXES, chart_text, curve_of

CHART_ORDER = list(CHARTS)


class CurveChart(Widget):
    DEFAULT_CSS = "CurveChart { width: 1fr; height: 1fr; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.runs: list[tuple[str, object]] = []  # (label, History)
        self.chart = "loss"
        self.log_scale = True  # loss and grad norm on a log scale; the others are always linear
        self.smoothed = False
        self.x_axis = "step"
        self.note = "no curves yet"
        self.x_end: int | None = None  # a live run: the axis reaches its planned last step

    def show_runs(self, runs, note: str = "no curves yet") -> None:
        """(label, History or None) per run, each in its place's colour; a run without a history
        keeps its place and draws nothing (a live run's empty history draws once it has points)."""
        from minitx.core.history import History

        self.runs = [(label, h if h is not None else History()) for label, h in runs]
        self.note = note
        self.refresh()

    def cycle(self, by: int = 1) -> str:
        self.chart = CHART_ORDER[(CHART_ORDER.index(self.chart) + by) % len(CHART_ORDER)]
        self.refresh()
        return self.chart

    def toggle_log(self) -> None:
        self.log_scale = not self.log_scale
        self.refresh()

    def toggle_smoothing(self) -> None:
        self.smoothed = not self.smoothed
        self.refresh()

    def toggle_x_axis(self) -> None:
        self.x_axis = X_AXES[(X_AXES.index(self.x_axis) + 1) % len(X_AXES)]
        self.refresh()

    def describe(self) -> str:
        """'loss · log · smoothed · by step': what is drawn, for a border title."""
        title, log_allowed = CHARTS[self.chart]
        parts = [title]
        if log_allowed:
            parts.append("log" if self.log_scale else "linear")
        if self.smoothed and self.chart != "accuracy":
            parts.append("smoothed")
        parts.append("by training time" if self.x_axis == "time" else "by step")
        return " · ".join(parts)

    def render(self) -> Text:
        if all(h.empty for _, h in self.runs):
            return Text(self.note, style="italic dim")
        curves = [curve_of(label, history, self.chart, self.x_axis, self.smoothed)
                  for label, history in self.runs]
        # The border title names the chart (describe()): the heading line is the legend alone.
        text = chart_text(curves, self.chart, self.size.width, self.size.height, log=self.log_scale,
                          x_axis=self.x_axis, title="", x_end=self.x_end)
        text.no_wrap = True
        text.overflow = "crop"
        return text
