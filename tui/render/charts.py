"""Training curves as terminal charts, for `minitx curves` and the app's chart widget alike.

A chart is a grid of character cells drawn here, in a few lines a person can check:

- one legend line says what every mark means: each run's mark, how many steps one dot of a
  line averages, and ○ for an evaluation that stopped early;
- the y axis carries its tick labels on the left (no two on neighbouring rows when there is
  room), the chart's title or the app's border names it;
- the x axis runs from the run's first recorded step to its last (a live run: to its planned
  end), with the first and last values always labelled and the axis named once, at the start of
  its tick labels ("step 1 ... 850").

Each run keeps one colour and one kind of mark in every chart (RUN_STYLES): braille dots (2x4 a
cell), quadrant blocks (2x2) or bullets, so overlaid runs stay apart without colour (NO_COLOR).
Where a run has more points than the chart has dots across, a dot is the mean of the points it
covers (on a log scale, of their logarithms): a loss that jumps from step to step draws its
trend, not a fence of vertical strokes. Rough evaluations (`train --until` stopped them once the
target was out of reach) are drawn as ○ and left out of the line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text

from minitx.core.history import History, keep_indices
from minitx.core.wording import counted

# chart name -> (title, log scale allowed)
CHARTS = {
    "loss": ("loss", True),
    # held-out outputs scored as text (a fine-tune's, --eval-bleu's); the base's score at step 0
    "bleu": ("held-out BLEU", False),
    "chrf": ("held-out chrF", False),
    "accuracy": ("held-out exact match", False),
    "lr": ("learning rate", False),
    "grad_norm": ("grad norm", True),
    # a watched fine-tune's (core/training/watching.py): one point per evaluation
    "general_loss": ("general-domain loss", True),
    "kl_to_base": ("KL to the base model", False),
    "aer": ("guided head's AER on held-out gold", False),  # a guided run's (guided_alignment.py)
    "numerics": ("fp16 headroom and gradient norm per layer", False),  # the app's table: numerics_text
    # a LoRA fine-tune's: each adapted layer's ||scale B A|| / ||W|| (a table: update_sizes_text)
    "lora_updates": ("LoRA update size per adapted layer", False),
}
SCORE_CHARTS = ("bleu", "chrf")  # drawn where a run's evaluations decoded text
TABLE_CHARTS = ("numerics", "lora_updates")  # tables of the evaluations: no scale, smoothing or x axis
EVALUATION_CHARTS = ("accuracy", *SCORE_CHARTS, "general_loss", "kl_to_base", "aer")  # a point an evaluation
X_AXES = ("step", "time")
AXIS_NAMES = {"step": "step", "time": "time"}  # written once, before the x tick labels
# Okabe-Ito colours (told apart with every common colour blindness) and marks that differ
# without colour: braille lines, quadrant blocks, bullets.
RUN_STYLES = [((86, 180, 233), "braille"), ((230, 159, 0), "hd"), ((0, 158, 115), "dot"),
              ((204, 121, 167), "braille"), ((240, 228, 66), "hd"), ((213, 94, 0), "dot")]
GLYPHS = {"braille": "⣿", "hd": "▀", "dot": "•"}  # a run's mark in the legend
DOTS = {"braille": (2, 4), "hd": (2, 2), "dot": (1, 1)}  # dots across and down one cell
SMOOTHING = 0.9  # weight of the moving average when smoothing is on (TensorBoard's slider)
AXIS_LINES = 2  # below the plotted rows: the x axis, then its tick labels
ROUGH, EVALUATION = "○", "●"
CURVE_POINTS = 4_000  # points of a run drawn at most: 25 a dot across an 80-column chart
MAX_AVERAGED = 50  # points one dot averages at most; more are thinned evenly first
# Braille dot bits by (column, row) of the 2x4 cell; quadrant blocks by their four bits.
BRAILLE_BITS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
QUADRANTS = " ▘▝▀▖▌▞▛▗▚▐▜▄▙▟█"  # index: 1 top-left, 2 top-right, 4 bottom-left, 8 bottom-right


@dataclass(frozen=True)
class Curve:
    label: str  # the run's name in the legend
    x: list[float]
    y: list[float]
    rough: tuple[bool, ...] = ()  # evaluations: True where one stopped early (its value is rough)
    span: tuple[float, float] | None = None  # the run's whole x extent (an evaluation curve's run)
    per_point: float = 1.0  # recorded points each point stands for (a long run is thinned first)


def smooth(values: list[float], weight: float = SMOOTHING) -> list[float]:
    """Exponential moving average, debiased so the first points are not pulled towards zero."""
    out, average = [], 0.0
    for n, value in enumerate(values, 1):
        average = weight * average + (1 - weight) * value
        out.append(average / (1 - weight**n))
    return out


def curve_of(label: str, history: History, chart: str, x_axis: str = "step",
             smoothed: bool = False) -> Curve:
    """One run's curve for a chart; x is the step or the training seconds at it. The curve spans
    the whole run (its first and last recorded step), so evaluations sit where they happened. A
    run of more than CURVE_POINTS steps is thinned evenly first (and smoothed after, with the
    weight of as many steps), so a live chart of a long run redraws as fast as a short one's."""
    rough: tuple[bool, ...] = ()
    per_point = 1.0
    if chart == "accuracy":  # evaluations are few: each one is worth seeing, and none is smoothed
        steps, values = history.series(chart)
        evaluations = history.evaluations()
        steps, values = steps[: len(evaluations)], values[: len(evaluations)]
        rough = tuple(not complete for *_, complete in evaluations[: len(steps)])
    elif chart in EVALUATION_CHARTS:  # scored or watched evaluations: as few, never smoothed
        steps, values = history.series(chart)
    else:
        steps, values = history.series(chart, at_most=CURVE_POINTS)
        per_point = max(1.0, len(history.steps) / max(1, len(steps)))
        if smoothed:
            values = smooth(values, SMOOTHING**per_point)
    run_steps = list(history.steps[:1]) + list(history.steps[-1:])
    ends = run_steps + steps[:1] + steps[-1:]
    span_steps = [min(ends), max(ends)] if ends else []
    if x_axis == "step":
        x, span = [float(s) for s in steps], [float(s) for s in span_steps]
    else:
        x, span = history.seconds_at(steps), history.seconds_at(span_steps)
    return Curve(label, x, values, rough, (span[0], span[1]) if span else None, per_point)


# -- the chart ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Scale:
    """Where a value lands on one axis: 0 at the low end, 1 at the high end."""

    lo: float
    hi: float
    log: bool = False

    def fraction(self, value: float) -> float:
        if self.log:
            value, lo, hi = math.log10(value), math.log10(self.lo), math.log10(self.hi)
        else:
            lo, hi = self.lo, self.hi
        return 0.5 if hi <= lo else (value - lo) / (hi - lo)


def chart_text(curves: list[Curve], chart: str, width: int, height: int = 0, log: bool = False,
               x_axis: str = "step", title: str | None = None, heading: bool = True,
               x_end: float | None = None, plot_rows: int | None = None) -> Text:
    """The chart of `curves` in `width` cells: a heading (the title, then the legend; on a line
    of its own where both do not fit one), the plot, the x axis and its labels; `height` lines in
    all, or `plot_rows` rows of plot and whatever the rest takes. `title` None: the chart's own
    name (and "log scale"); "" for none (a border names the chart); without `heading` no legend
    either. `log` applies where CHARTS allows it. `x_end`: the axis reaches at least this far (a
    live run's planned last step). A curve keeps the style of its place in `curves` even when
    another has no points, so run B is always B's colour."""
    name, log_allowed = CHARTS[chart]
    log = log and log_allowed
    width = max(24, width)
    kept = [(i, _plottable(c, log)) for i, c in enumerate(curves)]
    shown = [(i, c) for i, c in kept if c.x]
    if not shown:
        return Text(f"no {name} recorded", style="italic dim")
    xs = [x for _, c in shown for x in (*c.x, *(c.span or ()))]
    if x_axis == "time":  # training time starts at 0, before the first step's seconds
        xs.append(0.0)
    elif x_end is not None:
        xs.append(x_end)
    x_scale = _Scale(min(xs), max(xs))
    axis_name = AXIS_NAMES[x_axis]
    top = Text(title if title is not None else name + (" · log scale" if log else ""), style="bold")
    heading_lines = 1 if heading else 0  # the legend and the title share a line, if they fit
    while True:  # what the legend says depends on what was drawn: once more if it takes two lines
        rows = max(1, plot_rows if plot_rows is not None else height - AXIS_LINES - heading_lines)
        y_scale, y_ticks = _y_axis(chart, [y for _, c in shown for y in c.y], log, rows)
        y_labels = [f"{t:.0%}" for t in y_ticks] if chart == "accuracy" else tick_labels(y_ticks)
        margin = max([len(label) for label in y_labels] + [len(axis_name)])
        canvas = _Canvas(width - margin - 1, rows)
        for index, curve in shown:
            canvas.draw(curve, RUN_STYLES[index % len(RUN_STYLES)], x_scale, y_scale,
                        markers=chart in EVALUATION_CHARTS, steps_axis=x_axis == "step")
        key = legend([c.label if c.x else f"{c.label} (none)" for c in curves],
                     averaged=canvas.averaged if chart not in EVALUATION_CHARTS else 1,
                     evaluations=canvas.evaluations, rough=canvas.rough,
                     unit="steps" if x_axis == "step" else "points")
        needed = len(_heading(top, key, width)) if heading else 0
        if needed <= heading_lines or plot_rows is not None:
            break
        heading_lines = needed
    lines = _plot_lines(canvas, y_scale, y_ticks, y_labels, margin)
    lines += _x_axis(x_scale, x_axis, margin, canvas.columns)
    if not heading:
        return Text("\n").join(lines)
    return Text("\n").join([*_heading(top, key, width), *lines])


def _heading(title: Text, key: Text, width: int) -> list[Text]:
    """The title and the legend on one line where they fit, else on two; each cut to `width`."""
    if not title.plain:
        lines = [key.copy()]
    elif title.cell_len + 3 + key.cell_len <= width:
        lines = [Text.assemble(title, "   ", key)]
    else:
        lines = [title.copy(), key.copy()]
    for line in lines:
        line.truncate(width, overflow="ellipsis")
    return lines


def legend(labels: list[str], averaged: int = 1, evaluations: bool = False, rough: bool = False,
           unit: str = "steps") -> Text:
    """'⣿ A   ▀ B   a dot: mean over 6 steps   ● evaluation   ○ stopped early (rough)': each
    run's mark in its colour, then what the chart's other marks mean (`averaged`: the steps a
    dot of a line covers, or with unit "points" the recorded points it averages)."""
    text = Text()
    for index, label in enumerate(labels):
        (r, g, b), marker = RUN_STYLES[index % len(RUN_STYLES)]
        if index:
            text.append("   ")
        text.append(GLYPHS[marker], style=f"bold rgb({r},{g},{b})")
        text.append(f" {label}")
    if averaged > 1:
        text.append(f"   a dot: mean over {averaged} steps" if unit == "steps" else
                    f"   a dot: mean of {averaged} points", style="dim")
    if evaluations:
        text.append("   ")
        text.append(EVALUATION, style="bold")
        text.append(" evaluation", style="dim")
    if rough:
        text.append("   ")
        text.append(ROUGH, style="bold")
        text.append(" stopped early (rough)", style="dim")
    return text


def _plottable(curve: Curve, log: bool) -> Curve:
    """The points a scale can place: finite, and positive on a log scale."""
    rough = curve.rough or (False,) * len(curve.x)
    points = [(x, y, r) for x, y, r in zip(curve.x, curve.y, rough)
              if math.isfinite(x) and math.isfinite(y) and (y > 0 or not log)]
    return Curve(curve.label, [p[0] for p in points], [p[1] for p in points],
                 tuple(p[2] for p in points), curve.span, curve.per_point)


def _y_axis(chart: str, ys: list[float], log: bool, rows: int) -> tuple[_Scale, list[float]]:
    """The y scale and the ticks to label on `rows` rows."""
    if chart == "accuracy":
        scale, ticks = _Scale(0.0, 1.0), [0.0, 0.25, 0.5, 0.75, 1.0]
    elif chart in SCORE_CHARTS:  # 0-100, drawn from 0 so a rise reads as its size
        hi = max(ys)
        top = 100.0 if hi > 50 else max(10.0, -(-hi // 10) * 10)
        scale, ticks = _Scale(0.0, top), linear_ticks(0.0, top, 4)
    else:
        lo, hi = min(ys), max(ys)
        if hi <= lo:  # one value (a flat learning rate): room around it
            lo, hi = (lo / 2, hi * 2) if log else (lo - (abs(lo) or 1) * 0.1, hi + (abs(hi) or 1) * 0.1)
        scale = _Scale(lo, hi, log)
        ticks = log_ticks(lo, hi) if log else linear_ticks(lo, hi, 4)
    return scale, _spread(ticks, [_row(scale.fraction(t), rows) for t in ticks])


def _row(fraction: float, rows: int) -> int:
    """The cell row (0 at the top) of a y fraction, at braille resolution."""
    dots = rows * 4
    return min(rows - 1, max(0, round((1 - fraction) * (dots - 1)) // 4))


def _spread(ticks: list[float], rows: list[int]) -> list[float]:
    """The most ticks (of increasing values, so on rising rows) whose labels sit at least two rows
    apart, else at least one: every tick, every second one, ..., or as many as fit going down
    from the top; never fewer than two where two rows differ. Ties keep the highest and the
    lowest tick."""
    for gap in (2, 1):
        options = [list(range(offset, len(ticks), every))
                   for every in range(1, len(ticks) + 1) for offset in range(every)]
        from_top: list[int] = []
        for i in reversed(range(len(ticks))):
            if not from_top or rows[i] - rows[from_top[0]] >= gap:
                from_top.insert(0, i)
        options.append(from_top)
        fitting = [o for o in options if len(o) >= 2
                   and all(rows[a] - rows[b] >= gap for a, b in zip(o, o[1:]))]
        if fitting:  # the most ticks, then the top and bottom ones kept, then even spacing
            last = len(ticks) - 1
            return [ticks[i] for i in max(fitting, key=lambda o: (len(o), o[-1] == last, o[0] == 0))]
    return ticks[:1]


class _Canvas:
    """Cells of marks: each run's dots, then its markers, a later run over an earlier one."""

    def __init__(self, columns: int, rows: int) -> None:
        self.columns, self.rows = columns, rows
        self.cells: dict[tuple[int, int], tuple[str, str]] = {}  # (row, column) -> (char, style)
        self.averaged = 1  # the most steps (or points) one dot of a line covers, where it averages
        self.evaluations = self.rough = False  # whether ● and ○ marks were drawn

    def draw(self, curve: Curve, style, x_scale: _Scale, y_scale: _Scale, markers: bool,
             steps_axis: bool = True) -> None:
        """One curve's line; with `markers` (evaluations) ○ on each rough point, and ● on each
        complete one where they are few enough to tell apart."""
        (r, g, b), marker = style
        colour = f"rgb({r},{g},{b})"
        across, down = DOTS[marker]
        wide, tall = self.columns * across, self.rows * down
        line = [(x, y) for x, y, rough in zip(curve.x, curve.y, curve.rough) if not rough]
        dots, averaged = _averaged(line, x_scale, y_scale, wide, tall)
        if averaged > 1:  # on a step axis a dot covers the same steps whatever was recorded in them
            steps = (x_scale.hi - x_scale.lo) / max(1, wide - 1)
            self.averaged = max(self.averaged, round(steps if steps_axis else averaged * curve.per_point))
        bits: dict[tuple[int, int], int] = {}
        for (x0, y0), (x1, y1) in zip(dots, dots[1:] or dots):
            for px, py in _segment(x0, y0, x1, y1):
                cell = (py // down, px // across)
                bits[cell] = bits.get(cell, 0) | _bit(marker, px % across, py % down)
        for cell, value in bits.items():
            self.cells[cell] = (_glyph(marker, value), colour)
        evaluations = [p for p in zip(curve.x, curve.y, curve.rough) if p[2]] if markers else []
        if markers and len(line) <= self.columns // 4:  # few evaluations: each one is marked
            evaluations += [(x, y, False) for x, y in line]
        for x, y, rough in evaluations:
            column = round(x_scale.fraction(x) * (self.columns - 1))
            row = _row(y_scale.fraction(y), self.rows)
            self.cells[(row, column)] = (ROUGH if rough else EVALUATION, f"bold {colour}")
            self.rough, self.evaluations = self.rough or rough, self.evaluations or not rough


def _averaged(points, x_scale: _Scale, y_scale: _Scale, wide: int, tall: int):
    """(dot column, dot row) per dot column the points reach: the mean of the y fractions of the
    points in it; and the most points one dot stands for (of those given)."""
    thinned = 1.0
    if len(points) > MAX_AVERAGED * wide:  # a very long run: thinned evenly first
        keep = keep_indices([p[0] for p in points], MAX_AVERAGED * wide)
        thinned = len(points) / len(keep)
        points = [points[i] for i in keep]
    sums: dict[int, list[float]] = {}
    for x, y in points:
        column = min(wide - 1, max(0, round(x_scale.fraction(x) * (wide - 1))))
        total = sums.setdefault(column, [0.0, 0])
        total[0] += y_scale.fraction(y)
        total[1] += 1
    dots = [(column, min(tall - 1, max(0, round((1 - s / n) * (tall - 1)))))
            for column, (s, n) in sorted(sums.items())]
    return dots, thinned * max((n for _, n in sums.values()), default=1)


def _segment(x0: int, y0: int, x1: int, y1: int):
    """The dots of a straight line from one dot to the next (Bresenham)."""
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x1 >= x0 else -1), (1 if y1 >= y0 else -1)
    error = dx + dy
    while True:
        yield x0, y0
        if x0 == x1 and y0 == y1:
            return
        doubled = 2 * error
        if doubled >= dy:
            error += dy
            x0 += sx
        if doubled <= dx:
            error += dx
            y0 += sy


def _bit(marker: str, across: int, down: int) -> int:
    if marker == "braille":
        return BRAILLE_BITS[across][down]
    if marker == "hd":
        return 1 << (across + 2 * down)
    return 1


def _glyph(marker: str, bits: int) -> str:
    if marker == "braille":
        return chr(0x2800 + bits)
    if marker == "hd":
        return QUADRANTS[bits]
    return "•"


def _plot_lines(canvas: _Canvas, y_scale: _Scale, ticks: list[float], labels: list[str],
                margin: int) -> list[Text]:
    at = {_row(y_scale.fraction(t), canvas.rows): label for t, label in zip(ticks, labels)}
    lines = []
    for row in range(canvas.rows):
        line = Text(at.get(row, "").rjust(margin))
        line.append("┤" if row in at else "│", style="dim")
        for column in range(canvas.columns):
            char, style = canvas.cells.get((row, column), (" ", ""))
            line.append(char, style=style)
        lines.append(line)
    return lines


def _x_axis(scale: _Scale, x_axis: str, margin: int, columns: int) -> list[Text]:
    """The axis line with a ┬ under each labelled value, then the labels: the first and the last
    always, round values between them where they fit, the axis's name before them."""
    name = AXIS_NAMES[x_axis]
    label = duration if x_axis == "time" else _step_label
    ends = [(0, label(scale.lo)), (columns - 1, label(scale.hi))] if scale.hi > scale.lo \
        else [(0, label(scale.lo))]
    placed: list[tuple[int, int, int]] = []  # (column, start, end) of each label, in the label row
    row = [" "] * (margin + 1 + columns)
    row[margin - len(name): margin] = name

    def place(column: int, text: str, start: int) -> bool:
        start = max(margin + 1, min(start, margin + 1 + columns - len(text)))
        end = start + len(text)
        if any(start < b + 2 and a < end + 2 for _, a, b in placed):
            return False
        row[start:end] = text
        placed.append((column, start, end))
        return True

    place(ends[0][0], ends[0][1], margin + 1)
    if len(ends) > 1:
        place(ends[1][0], ends[1][1], margin + 1 + columns - len(ends[1][1]))
        for tick in linear_ticks(scale.lo, scale.hi, max(2, columns // 12)):
            column = round(scale.fraction(tick) * (columns - 1))
            if 0 < column < columns - 1:
                text = label(tick)
                place(column, text, margin + 1 + column - len(text) // 2)
    axis = ["─"] * columns
    for column, _, _ in placed:
        axis[column] = "┬"
    return [Text(" " * margin + "└" + "".join(axis), style="dim"), Text("".join(row).rstrip())]


def _step_label(value: float) -> str:
    return short_number(round(value)) if abs(value - round(value)) < 1e-9 else short_number(value)


# -- ticks -------------------------------------------------------------------------------------
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


# -- a fine-tune's numerics, per layer -----------------------------------------------------------
SPARKS = "▁▂▃▄▅▆▇█"
SUBLAYER_SHORT = {"self-attention": "self", "cross-attention": "cross", "feed-forward": "ff"}
STACK_SHORT = {"encoder": "enc", "decoder": "dec"}


def short_point(sublayer: str) -> str:
    """'feed-forward' -> 'ff', 'residual after feed-forward' -> 'res ff'."""
    words = sublayer.split(" after ")
    return " ".join([*(["res"] if len(words) > 1 else []), SUBLAYER_SHORT.get(words[-1], words[-1])])


def sparkline(values: list[float], lo: float, hi: float, width: int, log: bool = False) -> str:
    """`values` as one line of block heights between lo and hi, the last `width` of them (each
    cell one evaluation, the latest at the right); ! for a value that is not finite."""
    cells = []
    for value in values[-width:]:
        if value is None or not math.isfinite(value) or (log and value <= 0):
            cells.append("!")
            continue
        fraction = _Scale(lo, hi, log).fraction(value) if hi > lo else 0.5
        cells.append(SPARKS[max(0, min(len(SPARKS) - 1, round(fraction * (len(SPARKS) - 1))))])
    return "".join(cells).ljust(width)


def short_module(name: str) -> str:
    """'decoder.1.cross_attn.q_proj' -> 'dec L2 cross q' (layers from 1, as numerics names them)."""
    stack, layer, block, proj = name.split(".")
    return f"{STACK_SHORT.get(stack, stack)} L{int(layer) + 1} {block.removesuffix('_attn')} " \
        f"{proj.removesuffix('_proj')}"


def update_sizes_text(history: History, width: int, height: int) -> Text:
    """A LoRA fine-tune's update sizes at each watched evaluation, one row an adapted layer:
    'dec L2 cross q', a sparkline of ||scale B A|| / ||W|| over the evaluations (how far the
    layer moved from its base, as a share of its weight), and the latest value."""
    updates = history.lora_updates()
    if updates is None:
        return Text("no LoRA update sizes recorded: a LoRA fine-tune's evaluations record them "
                    "(train --init MODEL --lora R)", style="italic dim")
    steps, layers = updates["step"], updates["layers"]
    names = [short_module(layer["name"]) for layer in layers]
    label = max(len(n) for n in names)
    spark = max(4, min(40, width - label - 2 - 10))
    text = Text(f"LoRA update size ||scale B A|| / ||W|| · {len(steps)} evaluations, step "
                f"{steps[0]}-{steps[-1]}\n", style="bold", no_wrap=True, overflow="crop")
    values = [v for layer in layers for v in layer["size"] if v is not None and math.isfinite(v)]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    shown = list(zip(names, layers))
    if len(shown) > height - 1:
        shown = shown[: max(0, height - 2)]
    for name, layer in shown:
        sizes = layer["size"]
        text.append(f"{name:<{label}}  {sparkline(sizes, lo, hi, spark)} {sizes[-1]:>8.3g}\n")
    if len(shown) < len(layers):
        text.append(f"… {len(layers) - len(shown)} more layers: a taller terminal shows them", style="dim")
    text.rstrip()
    return text


def numerics_text(layers: list[tuple[str, list[float], str, list[float]]], steps: list[int],
                  width: int, height: int) -> Text:
    """A fine-tune's numerics at each watched evaluation (`steps`), one row a layer: 'enc L1',
    the fp16 headroom of its tightest point (65504 / its largest |activation|, log scale: below 1
    it overflows, red) and that point's name, then its gradient norm. `layers`: (name,
    headroom per evaluation, the tightest point now, gradient norm per evaluation)."""
    if not steps or not layers:
        return Text("no numerics recorded: a fine-tune's evaluations record them (train --init)",
                    style="italic dim")
    label = max(len(name) for name, *_ in layers)
    spark = max(4, (width - label - 2 - 18 - 9) // 2)
    text = Text(f"fp16 headroom (tightest point) · gradient norm · {counted(len(steps), 'evaluation')}, "
                f"step {steps[0]}-{steps[-1]}\n", style="bold", no_wrap=True, overflow="crop")
    rooms = [v for _, h, _, _ in layers for v in h if v is not None and math.isfinite(v) and v > 0]
    norms = [v for *_, g in layers for v in g if v is not None and math.isfinite(v) and v > 0]
    room_lo, room_hi = (min(rooms), max(rooms)) if rooms else (1.0, 1.0)
    norm_lo, norm_hi = (min(norms), max(norms)) if norms else (1.0, 1.0)
    shown = layers if len(layers) <= height - 1 else layers[: max(0, height - 2)]
    for name, headroom, point, grads in shown:
        now = headroom[-1] if headroom else None
        overflow = now is not None and math.isfinite(now) and now < 1
        text.append(f"{name:<{label}}  ")
        text.append(sparkline(headroom, room_lo, room_hi, spark, log=True), style="red" if overflow else "")
        room = "-" if now is None or not math.isfinite(now) else f"{now:.3g}"
        text.append(f" {room:>8} {point:<8} ", style="bold red" if overflow else "")
        text.append(sparkline(grads, norm_lo, norm_hi, spark, log=True) if grads else " " * spark)
        text.append(f" {f'{grads[-1]:.3g}' if grads else '-':>8}\n")
    if len(shown) < len(layers):
        text.append(f"… {len(layers) - len(shown)} more layers: a taller terminal shows them", style="dim")
    text.rstrip()
    return text
