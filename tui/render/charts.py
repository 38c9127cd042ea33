"""Training curves as terminal charts, for `minitx curves` and the app's chart widget alike.

A chart is drawn by plotext (through textual-plotext's Plot, a figure of its own rather than
plotext's global one) into ANSI text that Rich and Textual show as it is. Before drawing, each
curve is thinned to what the chart's braille dots can show (two points per column), which keeps
a redraw at about 10 ms however long the run.

Runs keep one colour and one marker each in every chart (RUN_STYLES), so a legend entry means the
same run everywhere, and overlaid runs stay apart on a terminal without colour (NO_COLOR).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text

from minitx.core.training.history import History, keep_indices

# chart name -> (title, log scale allowed)
CHARTS = {
    "loss": ("loss", True),
    "accuracy": ("held-out exact match", False),
    "lr": ("learning rate", False),
    "grad_norm": ("grad norm", True),
}
X_AXES = ("step", "time")
# Okabe-Ito colours (told apart with every common colour blindness) and markers that differ
# without colour: braille lines, half blocks, dots.
RUN_STYLES = [((86, 180, 233), "braille"), ((230, 159, 0), "hd"), ((0, 158, 115), "dot"),
              ((204, 121, 167), "braille"), ((240, 228, 66), "hd"), ((213, 94, 0), "dot")]
SMOOTHING = 0.9  # weight of the moving average when smoothing is on (TensorBoard's slider)
FRAME_LINES = 4  # plotext's lines around the plotted rows: top and bottom border, x ticks, x label


@dataclass(frozen=True)
class Curve:
    label: str  # the run's name in the legend
    x: list[float]
    y: list[float]


def smooth(values: list[float], weight: float = SMOOTHING) -> list[float]:
    """Exponential moving average, debiased so the first points are not pulled towards zero."""
    out, average = [], 0.0
    for n, value in enumerate(values, 1):
        average = weight * average + (1 - weight) * value
        out.append(average / (1 - weight**n))
    return out


def curve_of(label: str, history: History, chart: str, x_axis: str = "step",
             smoothed: bool = False) -> Curve:
    """One run's curve for a chart; x is the step or the training seconds at it."""
    steps, values = history.series(chart)
    if smoothed and chart != "accuracy":  # evaluations are few: each one is worth seeing
        values = smooth(values)
    x = [float(s) for s in steps] if x_axis == "step" else history.seconds_at(steps)
    return Curve(label, x, values)


def chart_height(plot_rows: int, heading: bool = True) -> int:
    """The height to give chart_text for `plot_rows` rows of plot: the frame (and heading) added."""
    return plot_rows + FRAME_LINES + (1 if heading else 0)


def chart_text(curves: list[Curve], chart: str, width: int, height: int, log: bool = False,
               x_axis: str = "step", title: str | None = None, heading: bool = True) -> Text:
    """The chart of `curves` in width x height cells: a heading line (title, then the legend when
    there are several runs; without `heading`, none), then the plot. `log` only applies where
    CHARTS allows it. A curve keeps the style of its place in `curves` even when another has no
    points, so run B is always B's colour."""
    from textual_plotext.plot import Plot

    name, log_allowed = CHARTS[chart]
    log = log and log_allowed
    width, height = max(20, width), max(5, height)
    styled = [(RUN_STYLES[i % len(RUN_STYLES)], _thinned(c, width, log)) for i, c in enumerate(curves)]
    styled = [(style, c) for style, c in styled if c.x]
    shown = [c for _, c in styled]
    if not shown:
        return Text(f"no {name} recorded", style="italic dim")
    plot = Plot()
    plot._limit_size(False, False)  # plotext would shrink it to the terminal; the caller knows better
    plot.plotsize(width, height - 1 if heading else height)
    plot.theme("clear")  # the terminal's own background and text colours
    for (colour, marker), curve in styled:
        plot.plot(curve.x, curve.y, marker=marker, color=colour)
    ys = [y for c in shown for y in c.y]
    xs = [x for c in shown for x in c.x]
    if log:
        plot.yscale("log")
        ticks = log_ticks(min(ys), max(ys))
    elif chart == "accuracy":
        plot.ylim(0, 1)
        ticks = [0.0, 0.25, 0.5, 0.75, 1.0]
    else:
        ticks = linear_ticks(min(ys), max(ys), 4)
    labels = [f"{t:.0%}" for t in ticks] if chart == "accuracy" else tick_labels(ticks)
    plot.yticks(ticks, labels)
    x_ticks = linear_ticks(min(xs), max(xs), max(2, width // 16))
    plot.xticks(x_ticks, [duration(t) for t in x_ticks] if x_axis == "time" else tick_labels(x_ticks))
    plot.xlabel("training time" if x_axis == "time" else "step")
    drawn = Text.from_ansi(plot.build())
    if not heading:
        return drawn
    heading_line = Text(title if title is not None else name + (" · log scale" if log else ""),
                        style="bold")
    if len(curves) > 1:  # the legend lives in the heading: plotext's own covers the curves
        heading_line.append_text(legend([c.label if c.x else f"{c.label} (none)" for c in curves]))
    heading_line.truncate(width)
    return Text("\n").join([heading_line, drawn])


def legend(labels: list[str]) -> Text:
    """'  ⣿ A  ▀ B': each run's marker in its colour."""
    glyphs = {"braille": "⣿", "hd": "▀", "dot": "•"}
    text = Text()
    for index, label in enumerate(labels):
        (r, g, b), marker = RUN_STYLES[index % len(RUN_STYLES)]
        text.append("   ")
        text.append(glyphs[marker], style=f"bold rgb({r},{g},{b})")
        text.append(f" {label}")
    return text


def _thinned(curve: Curve, width: int, log: bool) -> Curve:
    points = [(x, y) for x, y in zip(curve.x, curve.y) if math.isfinite(y) and (y > 0 or not log)]
    keep = keep_indices([p[0] for p in points], 2 * width)  # two braille dots per column
    return Curve(curve.label, [points[i][0] for i in keep], [points[i][1] for i in keep])


def linear_ticks(lo: float, hi: float, count: int) -> list[float]:
    """About `count` round values (1, 2 or 5 times a power of ten apart) covering lo..hi."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    steps = [m * power for m in (0.1, 0.2, 0.5, 1, 2, 5, 10)]  # 1-2-5 steps around raw
    at = next(i for i, step in enumerate(steps) if step >= raw)
    ticks = _multiples(lo, hi, steps[at])
    while len(ticks) < 2 and at > 0:  # a round step can leave one tick: 2.0 to 2.9 by 0.5
        at -= 1
        ticks = _multiples(lo, hi, steps[at])
    return ticks or [lo]


def _multiples(lo: float, hi: float, step: float) -> list[float]:
    ticks, value = [], math.ceil(lo / step) * step
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten within lo..hi; with 2 and 5 between them when fewer than three fit."""
    low, high = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    decades = [10.0**e for e in range(low, high + 1) if lo <= 10.0**e <= hi]
    if len(decades) >= 3:
        return decades
    ticks = [m * 10.0**e for e in range(low, high + 1) for m in (1, 2, 5) if lo <= m * 10.0**e <= hi]
    if len(ticks) < 2:  # a narrow range (a loss from 2.0 to 2.5): round values, placed on the log axis
        ticks = linear_ticks(lo, hi, 4)
    return ticks


def tick_labels(ticks: list[float]) -> list[str]:
    """short_number of each tick, with as many figures as it takes for no two to read the same
    (0.0015, 0.002 and 0.0025 are 1.5e-3, 2e-3 and 2.5e-3, not 2e-3 three times)."""
    for figures in range(1, 7):
        labels = [short_number(t, figures) for t in ticks]
        if len(set(labels)) == len(labels):
            return labels
    return labels


def short_number(value: float, figures: int = 1) -> str:
    """Tick labels: 1500 -> 1.5k, 0.001 -> 1e-3, 0.25 -> 0.25. Small numbers keep `figures`
    significant figures (at least), the others at least 3 (1k and up: 6)."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value / 1000:.{max(6, figures)}g}k"
    if magnitude < 0.01:
        mantissa, exponent = f"{value:.{figures - 1}e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.') if '.' in mantissa else mantissa}e{int(exponent)}"
    return f"{value:.{max(3, figures)}g}"


def duration(seconds: float) -> str:
    """Tick labels for training time: 45s, 2m30s, 1h05m."""
    if seconds < 10 and seconds != int(seconds):
        return f"{seconds:.1f}s"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s" if s % 60 else f"{s // 60}m"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
