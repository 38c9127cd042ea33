"""One chart of training curves at a time (loss, held-out accuracy, lr, grad norm; a fine-tune's
general-domain loss, KL to base and numerics per layer too), for one run or
several overlaid; the screen binds keys to cycle the chart and toggle scale, smoothing and x axis.

The widget draws histories (core.history.History, live or from files) through tui/render/charts.py, the
code `minitx curves` draws with too. It keeps no copy of the numbers: a live run's history grows
between two refreshes, and the next render shows it.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from minitx.tui.render.charts import (
    CHARTS,
    EVALUATION_CHARTS,
    STACK_SHORT,
    TABLE_CHARTS,
    X_AXES,
    chart_text,
    curve_of,
    numerics_text,
    short_point,
    update_sizes_text,
)

CHART_ORDER = list(CHARTS)
WATCH_CHARTS = ("general_loss", "kl_to_base", "numerics")  # a fine-tune's watching: g offers them then
LORA_CHARTS = ("lora_updates",)  # a LoRA fine-tune's: g offers it once an evaluation recorded it


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

    def charts(self) -> list[str]:
        """The charts g cycles through: a fine-tune's watching adds its own."""
        watched = any(h.watched is not None for _, h in self.runs)
        adapted = any(h.lora_updates() is not None for _, h in self.runs)
        return [c for c in CHART_ORDER
                if (watched or c not in WATCH_CHARTS) and (adapted or c not in LORA_CHARTS)]

    def cycle(self, by: int = 1) -> str:
        order = self.charts()
        at = order.index(self.chart) if self.chart in order else -1
        self.chart = order[(at + by) % len(order)]
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
        if self.chart in TABLE_CHARTS:  # a table of the evaluations: no scale, smoothing or x axis
            return title
        parts = [title]
        if log_allowed:
            parts.append("log" if self.log_scale else "linear")
        if self.smoothed and self.chart not in EVALUATION_CHARTS:
            parts.append("smoothed")
        parts.append("by training time" if self.x_axis == "time" else "by step")
        return " · ".join(parts)

    def render(self) -> Text:
        if all(h.empty for _, h in self.runs):
            return Text(self.note, style="italic dim")
        if self.chart == "numerics":  # the first run that has them (a table, not curves)
            watched = next((h.watched for _, h in self.runs if h.watched is not None), None)
            steps = watched.steps[: len(watched.activation_max)] if watched is not None else []
            text = numerics_text(numerics_rows(watched) if steps else [], steps, self.size.width,
                                 self.size.height)
            text.no_wrap, text.overflow = True, "crop"
            return text
        if self.chart == "lora_updates":  # the first run that has them (a table, not curves)
            history = next((h for _, h in self.runs if h.lora_updates() is not None), self.runs[0][1])
            text = update_sizes_text(history, self.size.width, self.size.height)
            text.no_wrap, text.overflow = True, "crop"
            return text
        curves = [curve_of(label, history, self.chart, self.x_axis, self.smoothed)
                  for label, history in self.runs]
        # The border title names the chart (describe()): the heading line is the legend alone.
        text = chart_text(curves, self.chart, self.size.width, self.size.height, log=self.log_scale,
                          x_axis=self.x_axis, title="", x_end=self.x_end)
        text.no_wrap = True
        text.overflow = "crop"
        return text


def numerics_rows(watched) -> list[tuple[str, list[float], str, list[float]]]:
    """Per layer of a fine-tune's watching (core.history.Watched), in forward order: its name,
    the fp16 headroom of its tightest point at each evaluation (core's ActivationRange.headroom),
    that point now, and its gradient norm at each evaluation."""
    from minitx.core.interp.numerics import ActivationRange

    layers: dict[tuple[str, int], list[tuple[str, list[float]]]] = {}
    for i, (stack, layer, sublayer) in enumerate(watched.points):
        rooms = [ActivationRange(stack, layer, sublayer, row[i]).headroom("fp16")
                 for row in watched.activation_max]
        layers.setdefault((stack, layer), []).append((sublayer, rooms))
    grads = {(stack, layer): [row[i] for row in watched.grad_norm]
             for i, (stack, layer) in enumerate(watched.layers)}
    rows = []
    for (stack, layer), points in layers.items():
        tightest = [min(rooms[e] for _, rooms in points) for e in range(len(watched.activation_max))]
        point = min(points, key=lambda p: p[1][-1])[0]
        rows.append((f"{STACK_SHORT.get(stack, stack)} L{layer}", tightest, short_point(point),
                     grads.get((stack, layer), [])))
    return rows
