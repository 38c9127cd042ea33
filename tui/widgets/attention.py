"""Attention pictures: one head's grid, every head as a small grid, and a table of scores.

The widgets take plain lists of floats (already computed by core) and only draw them: colour
from the viridis map, optional numbers in the cells, a legend saying what a colour means.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from minitx.tui.colors import text_colour_on, viridis_hex
from minitx.tui.widgets.redraw import redraw

_NO_WRAP = "height: auto; width: 100%; text-wrap: nowrap; text-overflow: clip;"
CELL = 3  # characters of colour per cell; a one-space gap follows each cell where it fits


def cell_text(value: float, numbers: bool) -> Text:
    """One grid cell: a block of colour, or the value printed on that colour."""
    if not numbers:
        label = ""
    else:
        label = "1.0" if value >= 0.995 else f"{value:.2f}"[1:]  # ".97" fits in three cells
    return Text(label.center(CELL), Style(bgcolor=viridis_hex(value), color=text_colour_on(value)))


def legend() -> Text:
    """'0.0 ▇▇▇▇▇▇▇▇ 1.0': what a colour means."""
    text = Text("0.0 ", style="dim")
    for i in range(9):
        text.append("  ", Style(bgcolor=viridis_hex(i / 8)))
    text.append(" 1.0 weight", style="dim")
    return text


class AttentionGrid(Widget):
    """Rows are queries (tokens produced), columns are keys (tokens attended to)."""

    DEFAULT_CSS = f"AttentionGrid {{ {_NO_WRAP} }}"

    numbers = reactive(False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.rows: list[list[float]] = []
        self.columns: list[str] = []
        self.row_labels: list[str] = []
        self.current: int | None = None
        self.hint = ""
        self.axes = ""
        self.causal = False  # row i may not see columns after i: draw those as '·', not colour

    def show(self, rows, columns, row_labels, current=None, hint="", axes="", causal=False) -> None:
        self.rows, self.columns, self.row_labels = rows, columns, row_labels
        self.current, self.hint, self.axes, self.causal = current, hint, axes, causal
        redraw(self)

    def render(self) -> Text:
        label_width = max([len(s) for s in self.row_labels] + [5]) + 1
        # Drop the gaps between cells before cropping columns (ten digits at 80 columns).
        fits = label_width + len(self.columns) * (CELL + 1) <= max(self.size.width, 1)
        gap = " " if fits else ""
        header = Text(" " * label_width)
        for column in self.columns:
            shown = column.strip("<>") if len(column) > CELL else column  # <sos> -> sos
            header.append(shown[:CELL].center(CELL) + gap, style="bold")
        lines = [header]
        for i, (row, label) in enumerate(zip(self.rows, self.row_labels, strict=False)):
            is_current = i == self.current
            line = Text()
            line.append(label.rjust(label_width - 1), style="bold reverse" if is_current else "")
            line.append(" ")
            for j, value in enumerate(row):
                if self.causal and j > i:
                    line.append("·".center(CELL), style="dim")
                else:
                    line.append_text(cell_text(value, self.numbers))
                line.append(gap)
            if is_current:
                line.append(" ◂ step" if not gap else "◂ step", style="bold")
            lines.append(line)
        if self.hint:
            lines.append(Text(self.hint, style="italic dim"))
        lines.append(Text())
        lines.append(legend())
        if self.axes:
            lines.append(Text(self.axes, style="dim"))
        text = Text("\n").join(lines)
        text.no_wrap = True
        text.overflow = "crop"
        return text


class HeadsOverview(Widget):
    """Every layer x head as a small grid, two rows per character ('▀' with fg = upper row,
    bg = lower row), each labelled with its alignment score: the working head stands out."""

    DEFAULT_CSS = f"HeadsOverview {{ {_NO_WRAP} }}"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.grids: list[list[list[list[float]]]] = []  # [layer][head] -> rows of floats
        self.scores: list[list[float]] = []  # empty: no score to label a head with
        self.selected = (0, 0)
        self.off: set[tuple[int, int]] = set()  # (layer, head) knocked out: labelled ✗
        self.note = "score: attention where the task expects it"

    def show(self, grids, scores, selected, off=(), note: str | None = None) -> None:
        self.grids, self.scores, self.selected, self.off = grids, scores, selected, set(off)
        if note is not None:
            self.note = note
        redraw(self)

    @staticmethod
    def _mini(rows: list[list[float]], columns: int, cell: int) -> list[Text]:
        lines = []
        for top in range(0, len(rows), 2):
            line = Text()
            for j in range(columns):
                upper = viridis_hex(rows[top][j])
                lower = viridis_hex(rows[top + 1][j]) if top + 1 < len(rows) else None
                line.append("▀" * cell, Style(color=upper, bgcolor=lower))
            lines.append(line)
        return lines

    def render(self) -> Text:
        if not self.grids or not self.grids[0] or not self.grids[0][0]:
            return Text("step the decoder (→) to see every head", style="italic dim")
        out: list[Text] = []
        columns = len(self.grids[0][0][0])
        # Two characters per column (closer to square) when every head still fits.
        cell = 2 if 3 + len(self.grids[0]) * max(2 * columns + 1, 9) <= self.size.width else 1
        width = columns * cell
        box = max(width + 1, 9)  # room for '▸H1 0.94' and a gap
        for layer, heads in enumerate(self.grids):
            minis = [self._mini(rows, columns, cell) for rows in heads]
            height = max(len(m) for m in minis)
            for r in range(height):
                line = Text("   " if r else f"L{layer + 1} ", style="bold")
                for mini in minis:
                    piece = mini[r] if r < len(mini) else Text(" " * width)
                    line.append_text(piece)
                    line.append(" " * (box - width))
                out.append(line)
            labels = Text("   ")
            for head in range(len(heads)):
                mark = "▸" if (layer, head) == self.selected else " "
                off = "✗" if (layer, head) in self.off else ""
                score = f" {self.scores[layer][head]:.2f}" if self.scores else ""
                style = "bold reverse" if (layer, head) == self.selected else ""
                labels.append(f"{mark}{off}H{head + 1}{score}".ljust(box)[:box], style=style)
            out.append(labels)
            out.append(Text())
        out.append(Text(self.note + (" · ✗ knocked out" if self.off else ""), style="dim"))
        text = Text("\n").join(out)
        text.no_wrap = True
        text.overflow = "crop"
        return text


class ScoreTable(Widget):
    """Alignment score per layer and head, coloured; the selected head in brackets."""

    DEFAULT_CSS = f"ScoreTable {{ {_NO_WRAP} }}"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.scores: list[list[float]] = []
        self.selected: tuple[int, int] | None = None
        self.note = ""
        self.off: set[tuple[int, int]] = set()  # (layer, head) knocked out: drawn as 'off'

    def show(self, scores, selected=None, note="", off=()) -> None:
        self.scores, self.selected, self.note, self.off = scores, selected, note, set(off)
        redraw(self)

    def render(self) -> Text:
        if not self.scores:
            return Text(self.note or "no scores yet", style="italic dim")
        heads = len(self.scores[0])
        lines = [Text("    " + "".join(f"H{h + 1}".center(6) for h in range(heads)), style="bold")]
        for layer, row in enumerate(self.scores):
            line = Text(f" L{layer + 1} ", style="bold")
            for head, score in enumerate(row):
                chosen = (layer, head) == self.selected
                line.append("[" if chosen else " ", style="bold")
                if (layer, head) in self.off:
                    line.append(" off", style="bold red")
                else:
                    line.append(f"{min(score, 1.0):.2f}",
                                Style(bgcolor=viridis_hex(score), color=text_colour_on(score)))
                line.append("]" if chosen else " ", style="bold")
            lines.append(line)
        if self.note:
            lines.append(Text(self.note, style="dim"))
        text = Text("\n").join(lines)
        text.no_wrap = True
        text.overflow = "crop"
        return text
