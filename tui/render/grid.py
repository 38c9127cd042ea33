"""Rich renderables for attention grids: coloured cells (viridis), optional numbers, a legend.

The same renderables go to the terminal (`decode --attention`) and into SVG files
(`export --trace --format svg`), so the picture a person saves is the one they saw.
"""

from __future__ import annotations

from rich.columns import Columns
from rich.console import Group
from rich.panel import Panel
from rich.text import Text

from minitx.tui.render.colors import text_colour_on, viridis_hex

CELL = 4  # characters per cell: room for " .97" or " 1.0"
COMPACT_CELL = 2  # for sources too long for 4-character cells at the width: " 7" is 0.7-0.8
PANEL_EDGES = 4  # a panel's borders and padding


def _cell(value: float, numbers: bool, width: int) -> Text:
    style = f"{text_colour_on(value)} on {viridis_hex(value)}"
    if not numbers:
        return Text(" " * width, style=style)
    if width < CELL:  # tenths: 0 for under 0.1, 9 for 0.9 and above
        return Text(str(min(9, int(value * 10))).rjust(width), style=style)
    shown = "1.0" if value >= 0.995 else f".{round(value * 100):02d}"
    return Text(shown.rjust(width), style=style)


def _fit(label: str, width: int) -> str:
    """The label in `width` cells: a special token too wide loses its brackets first (<bos> as
    bos, </s> as /s), then anything too wide is cut with …."""
    if len(label) > width and len(label) > 2 and label[0] == "<" and label[-1] == ">":
        label = label[1:-1]
    return label.rjust(width) if len(label) <= width else label[: width - 1] + "…"


def cell_width(row_labels: list[str], columns: int, width: int) -> int:
    """4-character cells when the grid fits `width` columns, else compact 2-character ones."""
    label_width = max([len(label) for label in row_labels] + [1])
    return CELL if label_width + 1 + columns * CELL + PANEL_EDGES <= width else COMPACT_CELL


def attention_grid(weights, row_labels: list[str], col_labels: list[str], numbers: bool,
                   cell: int = CELL) -> Text:
    """weights: rows x cols nested lists in [0, 1]; rows are output tokens, columns the source."""
    label_width = max([len(label) for label in row_labels] + [1])
    text = Text(" " * (label_width + 1))
    for label in col_labels:
        text.append(_fit(label, cell), style="bold")
    for label, row in zip(row_labels, weights, strict=True):
        text.append("\n" + label.rjust(label_width) + " ", style="bold")
        for value in row:
            text.append_text(_cell(float(value), numbers, cell))
    return text


def legend(compact_numbers: bool = False) -> Text:
    text = Text("weight 0 ")
    for i in range(9):
        text.append("  ", style=f"on {viridis_hex(i / 8)}")
    text.append(" 1   rows: output tokens · columns: source tokens")
    if compact_numbers:
        text.append(" · numbers: tenths (7 is 0.7-0.8)")
    return text


def trace_renderable(trace: dict, numbers: bool, title: str = "", width: int = 100):
    """Every layer/head grid of one decoding trace (see decode.trace_of), side by side where
    the `width` allows, with the prediction on top and a legend below. A source too long for
    4-character cells at that width gets compact ones (30-40 characters fit 80 columns)."""
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
    cell = cell_width(rows, len(cols), width)
    panels = []
    for layer, heads in enumerate(trace["cross_attention"]):
        for head, grid in enumerate(heads):
            panels.append(
                Panel(
                    attention_grid(grid, rows, cols, numbers, cell),
                    title=f"L{layer + 1} H{head + 1}",
                    expand=False,
                )
            )
    return Group(header, Text(""), Columns(panels), legend(numbers and cell < CELL))
