"""Attention grids as Rich text, one renderer for the command line (`decode --attention`,
`export --trace --format svg`) and the app (every grid of Explore, Compare, Train's probe and
the timeline): coloured cells from the viridis map, or shade characters where the terminal has 16
colours or none (NO_COLOR), optional numbers in the cells, and a legend saying what a colour
means. A grid too wide for its room takes narrower cells, then shows a window of its columns.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.columns import Columns
from rich.console import Group
from rich.panel import Panel
from rich.style import Style
from rich.text import Text

from minitx.tui.render.colors import FULL, colour_depth, shade, text_colour_on, viridis_hex
from minitx.tui.render.text_fit import end_cut

CELL = 3  # characters of colour per cell: room for ".97"; a one-space gap follows where it fits
CELLS = ((CELL, 1), (CELL, 0), (2, 0), (1, 0))  # (width, gap), widest first: the first that fits
ROW_LABEL = 12  # longest row label shown (a word-level model's outputs are words)
WIDE_CELL = 8  # a zoomed grid's widest cell: a subword piece whole (the app's z)
PANEL_EDGES = 4  # a Rich panel's borders and padding, around each grid the CLI prints


def cell_text(value: float, numbers: bool, width: int = CELL, depth: str = FULL) -> Text:
    """One grid cell: a block of colour (or of shade characters where colours are few), or the
    value printed on it (in cells too narrow for ".97", the tenths digit: 7 is 0.7-0.8). A
    negative value (an attribution against the token) is coloured by its size and marked '-'."""
    negative = value < 0
    value = -value if negative else value
    if not numbers:
        label = "-" if negative else ""
    elif negative:  # the sign takes a cell: "-.3", "-3" (tenths), "-"
        label = ("-1" if value >= 0.95 else "-" + f"{value:.1f}"[1:]) if width >= CELL \
            else f"-{min(9, int(value * 10))}" if width == 2 else "-"
    elif width >= CELL:
        label = "1.0" if value >= 0.995 else f"{value:.2f}"[1:]  # ".97" fits in three cells
    else:
        label = str(min(9, int(value * 10)))
    if depth != FULL:
        if numbers:
            return Text(label.center(width), style="bold" if value >= 0.5 else "")
        shades = shade(value, width)
        if negative:  # the mark in the middle of the shades
            middle = (width - 1) // 2
            shades = shades[:middle] + "-" + shades[middle + 1:]
        return Text(shades)
    return Text(label.center(width), Style(bgcolor=viridis_hex(value), color=text_colour_on(value)))


def legend(depth: str = FULL, width: int = 80, compact_numbers: bool = False, unit: str = "weight",
           signed: bool = False) -> Text:
    """'0.0 ▇▇▇▇▇▇▇▇ 1.0 weight': what a colour (or a shade) means, shorter where narrow. unit:
    what the values are; signed: a '-' in a cell marks a negative value (said where it fits)."""
    # "0.0 " and nine two-character cells, then " 1.0 weight": 33 characters for the unit "weight"
    steps, cell, tail = (9, 2, f" 1.0 {unit}") if width >= 27 + len(unit) else (5, 2, " 1.0") \
        if width >= 18 else (5, 1, " 1")
    text = Text("0.0 " if width >= 18 else "0 ", style="dim")
    for i in range(steps):
        text.append_text(cell_text(i / (steps - 1), False, cell, depth))
    text.append(tail, style="dim")
    if signed and width >= 27 + len(unit) + len(" · - negative"):
        text.append(" · - negative", style="dim")
    if compact_numbers and width >= 52 + (14 if signed else 0):
        text.append(" · numbers: tenths", style="dim")
    return text


def short_label(label: str) -> str:
    """<eos> -> eos: the special tokens' brackets, dropped where room is short."""
    return label.strip("<>") if label.startswith("<") and label.endswith(">") else label


def _fit(label: str, width: int) -> str:
    """A column label in `width` cells: a special token too wide loses its brackets (<sos> as
    sos), and a label still too wide is cut with …, so it never runs into the next one."""
    label = label.strip("<>") if len(label) > width else label
    if len(label) > width:
        label = end_cut(label, width) if width > 1 else label[:1]
    return label.center(width)


@dataclass(frozen=True)
class Layout:
    """How a grid fits its room: row labels, cells, the gap after each, how many columns show,
    the mark of the current row, and whether special tokens lose their brackets."""

    label_width: int
    cell: int
    gap: int
    visible: int
    mark: str
    short: bool


def fit(row_labels: list[str], columns: int, width: int, column_labels: list[str] | None = None) -> Layout:
    """The widest cells that show every column in `width` characters, else a window of them. At
    80 columns 1-character cells hold a 40-character source; "<eos>" becomes "eos" and "◂ step"
    just "◂" when that is what makes it fit. With `column_labels` (zoomed), cells as wide as
    the longest label (3-8 characters), so each reads whole, and a window of as many as fit."""
    total = max(width, 1)
    if column_labels is not None:
        label_width = min(max([len(s) for s in row_labels] + [5]), ROW_LABEL) + 1
        lengths = sorted(len(s) for s in column_labels) or [CELL]
        # as wide as three labels in four: the rare long piece is cut with … rather than every
        # cell made as wide as it
        cell = max(CELL, min(WIDE_CELL, lengths[(3 * len(lengths)) // 4 - (len(lengths) % 4 == 0)]))
        visible = max(1, min(columns, (total - label_width - 2) // (cell + 1)))
        return Layout(label_width, cell, 1, visible, "◂", False)
    for short in (False, True):
        labels = [short_label(label) for label in row_labels] if short else row_labels
        label_width = min(max([len(s) for s in labels] + [3 if short else 5]), ROW_LABEL) + 1
        for cell, gap in CELLS:
            used = label_width + columns * (cell + gap)
            if used + 1 <= total:  # room for the current row's ◂ after the cells
                # the longest mark that fits whole: never a cut "◂ ste"
                marks = ("◂ step", "◂") if gap else (" ◂ step", " ◂", "◂")
                mark = next(m for m in marks if used + len(m) <= total or m == "◂")
                return Layout(label_width, cell, gap, columns, mark, short)
    return Layout(label_width, 1, 0, max(1, total - label_width - 1), "◂", True)


def grid_lines(rows, columns: list[str], row_labels: list[str], layout: Layout, *, numbers: bool = False,
               depth: str = FULL, current: int | None = None, causal: bool = False,
               shown: range | None = None, shown_rows: range | None = None,
               under_current: tuple[str, list[float], str] | None = None) -> list[Text]:
    """The header of column labels, then one line per row: its label (the current row's reversed
    and marked), its cells (a causal grid's future as '·'). `shown`: the columns in view,
    `shown_rows` the rows. under_current: (label, values, mark) of a row drawn right under the
    current one, in the same columns and palette (Explore's attribution row under the step's
    attention row)."""
    shown = shown if shown is not None else range(len(columns))
    shown_rows = shown_rows if shown_rows is not None else range(len(rows))
    gap = " " * layout.gap
    header = Text(" " * layout.label_width)
    for j in shown:
        header.append(_fit(columns[j], layout.cell) + gap, style="bold")
    lines = [header]
    for i, (row, label) in enumerate(zip(rows, row_labels, strict=False)):
        if i not in shown_rows:
            continue
        is_current = i == current
        lines.append(row_line(row, label, layout, numbers=numbers, depth=depth, shown=shown,
                              style="bold reverse" if is_current else "",
                              mark=layout.mark if is_current else "", future=i + 1 if causal else None))
        if is_current and under_current is not None:
            label, values, mark = under_current
            lines.append(row_line(values, label, layout, numbers=numbers, depth=depth, shown=shown,
                                  style="italic", mark=mark))
    return lines


def row_line(row, label: str, layout: Layout, *, numbers: bool, depth: str, shown: range, style: str = "",
             mark: str = "", future: int | None = None) -> Text:
    """One grid row: its label right-aligned (cut with … where long), its cells, then `mark`;
    columns from `future` on are drawn '·' (what a causal row may not see)."""
    gap = " " * layout.gap
    line = Text()
    label = short_label(label) if layout.short else label
    label = end_cut(label, layout.label_width - 1)  # a cell left before the grid
    line.append(label.rjust(layout.label_width - 1), style=style)
    line.append(" ")
    for j in shown:
        if future is not None and j >= future:
            line.append("·".center(layout.cell), style="dim")
        else:
            line.append_text(cell_text(row[j], numbers, layout.cell, depth))
        line.append(gap)
    if mark:
        line.append(mark, style="bold")
    return line


def console_depth(console) -> str:
    """The colour depth a Rich console can show (NO_COLOR, a pipe or 16 colours: shades)."""
    return colour_depth(bool(getattr(console, "no_color", False)), console.color_system)


def trace_renderable(trace: dict, numbers: bool, title: str = "", width: int = 100, depth: str = FULL):
    """Every layer/head grid of one decoding trace (see trace.trace_of), side by side where the
    `width` allows, with the prediction on top and a legend below. A source too long for full
    cells at that width gets narrower ones (30-40 characters fit 80 columns)."""
    header = Text()
    if title:
        header.append(title + "\n", style="bold")
    header.append("source      ", style="dim")
    header.append(trace["source"] + "\n")
    header.append("prediction  ", style="dim")
    header.append(trace["prediction"])
    if trace.get("expected") is not None:
        mark, style = ("✓", "green") if trace["correct"] else (f"✗ expected {trace['expected']}", "red")
        header.append("  " + mark, style=style)
    if trace.get("ablated"):
        header.append("\nablated     ", style="dim")
        header.append(", ".join(trace["ablated"]))
    rows = [step["text"] for step in trace["steps"]]
    cols = trace.get("source_tokens") or trace["source"].split()
    layout = fit(rows, len(cols), width - PANEL_EDGES)
    if layout.visible < len(cols):  # the CLI prints whole grids: the narrowest cells, every column
        layout = Layout(layout.label_width, 1, 0, len(cols), layout.mark, True)
    panels = []
    for layer, heads in enumerate(trace["cross_attention"]):
        for head, grid in enumerate(heads):
            body = Text("\n").join(grid_lines(grid, cols, rows, layout, numbers=numbers, depth=depth))
            panels.append(Panel(body, title=f"cross L{layer + 1} H{head + 1}", expand=False))
    axes = Text("rows: output tokens · columns: source tokens", style="dim")
    key = legend(depth, width, numbers and layout.cell < CELL)
    return Group(header, Text(""), Columns(panels), key, axes)
