"""Attention pictures: one head's grid, every head as a small grid, and a table of scores.

The widgets take plain lists of floats (already computed by core) and only draw them: colour
from the viridis map (or shade characters where the terminal has 16 colours or none), optional
numbers in the cells, a legend saying what a colour means. A grid wider than its widget shows a
window of its columns that follows the step's strongest column; < and > move it.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from minitx.tui.colors import FULL, depth_of, shade, text_colour_on, viridis_hex
from minitx.tui.widgets.redraw import redraw

_NO_WRAP = "height: auto; width: 100%; text-wrap: nowrap; text-overflow: clip;"
CELL = 3  # characters per cell; a one-space gap follows each cell where it fits (always with #)


def number_label(value: float) -> str:
    return "1.0" if value >= 0.995 else f"{value:.2f}"[1:]  # ".97" fits in three cells


def cell_text(value: float, numbers: bool, depth: str = FULL, width: int = CELL) -> Text:
    """One grid cell: a block of colour (or of shade characters), or the value printed on it."""
    if depth != FULL:
        if numbers:
            return Text(number_label(value).center(width), style="bold" if value >= 0.5 else "")
        return Text(shade(value, width))
    label = number_label(value) if numbers else ""
    return Text(label.center(width), Style(bgcolor=viridis_hex(value), color=text_colour_on(value)))


def legend(depth: str = FULL, width: int = 80) -> Text:
    """'0.0 ▇▇▇▇▇▇▇▇ 1.0 weight': what a colour (or a shade) means, shorter where narrow."""
    steps, cell, tail = (9, 2, " 1.0 weight") if width >= 33 else (5, 2, " 1.0") if width >= 18 \
        else (5, 1, " 1")
    text = Text("0.0 " if width >= 18 else "0 ", style="dim")
    for i in range(steps):
        text.append_text(cell_text(i / (steps - 1), False, depth, width=cell))
    text.append(tail, style="dim")
    return text


def column_window(first: int, follow: int | None, visible: int, total: int) -> int:
    """The first column to show: `follow` in view (centred when it was not), within bounds."""
    if follow is not None and not first <= follow < first + visible:
        first = follow - visible // 2
    return max(0, min(first, total - visible))


class AttentionGrid(Widget):
    """Rows are queries (tokens produced), columns are keys (tokens attended to)."""

    DEFAULT_CSS = f"AttentionGrid {{ {_NO_WRAP} }}"

    numbers = reactive(False)

    def __init__(self, *, id: str | None = None, classes: str | None = None, compact: bool = False) -> None:
        super().__init__(id=id, classes=classes)
        self.rows: list[list[float]] = []
        self.columns: list[str] = []
        self.row_labels: list[str] = []
        self.current: int | None = None
        self.hint = ""
        self.axes = ""
        self.causal = False  # row i may not see columns after i: draw those as '·', not colour
        self.compact = compact  # no blank line above the legend (the Train screen's probe)
        self.first = 0  # first column shown when they do not all fit
        self.follow: int | None = None  # a column to keep in view; None once scrolled by hand

    def show(self, rows, columns, row_labels, current=None, hint="", axes="", causal=False,
             follow=None) -> None:
        self.rows, self.columns, self.row_labels = rows, columns, row_labels
        self.current, self.hint, self.axes, self.causal = current, hint, axes, causal
        self.follow = follow
        redraw(self)

    def _label_width(self) -> int:
        return max([len(s) for s in self.row_labels] + [5]) + 1

    def layout_columns(self, width: int | None = None) -> tuple[int, int]:
        """(gap, visible): the space after each cell and how many columns fit in `width`."""
        width = max(self.size.width if width is None else width, 1)
        room, total = width - self._label_width(), len(self.columns)
        gap = 1 if self.numbers or total * (CELL + 1) <= room else 0  # numbers must not touch
        if total * (CELL + gap) <= room:
            return gap, total
        return gap, min(total, max(1, (room - 1) // (CELL + gap)))  # one character for '›'

    @property
    def cropped(self) -> bool:
        return bool(self.size.width) and self.layout_columns()[1] < len(self.columns)

    def scroll_columns(self, direction: int) -> None:
        visible = self.layout_columns()[1]
        self.first = column_window(self.first + direction * max(1, visible // 2), None, visible,
                                   len(self.columns))
        self.follow = None
        redraw(self)

    def render(self) -> Text:
        depth, label_width = depth_of(self), self._label_width()
        gap_width, visible = self.layout_columns()
        total, gap = len(self.columns), " " * gap_width
        first = self.first = column_window(self.first, self.follow, visible, total)
        shown = range(first, first + visible)
        header = Text(("‹" if first else "").rjust(label_width - 1) + " ")
        for j in shown:
            column = self.columns[j]
            name = column.strip("<>") if len(column) > CELL else column  # <sos> -> sos
            header.append(name[:CELL].center(CELL) + gap, style="bold")
        if first + visible < total:
            header.append("›", style="bold")
        lines = [header]
        for i, (row, label) in enumerate(zip(self.rows, self.row_labels, strict=False)):
            is_current = i == self.current
            line = Text()
            line.append(label.rjust(label_width - 1), style="bold reverse" if is_current else "")
            line.append(" ")
            for j in shown:
                if self.causal and j > i:
                    line.append("·".center(CELL), style="dim")
                else:
                    line.append_text(cell_text(row[j], self.numbers, depth))
                line.append(gap)
            if is_current:  # '◂ step' where it fits, else the arrow alone
                mark = ("" if gap else " ") + "◂ step"
                if line.cell_len + len(mark) > self.size.width:
                    mark = mark[: len(mark) - len(" step")]
                line.append(mark, style="bold")
            lines.append(line)
        if visible < total:
            lines.append(Text(f"columns {first + 1}-{first + visible} of {total} · < > scroll",
                              style="dim"))
        if self.hint:
            lines.append(Text(self.hint, style="italic dim"))
        if not self.compact:
            lines.append(Text())
        lines.append(legend(depth, self.size.width or 80))
        if self.axes:
            lines.append(Text(self.axes, style="dim"))
        text = Text("\n").join(lines)
        text.no_wrap = True
        text.overflow = "crop"
        return text


class HeadsOverview(Widget):
    """Every layer x head as a small grid, two rows per character ('▀' with fg = upper row,
    bg = lower row; one row a line in shade characters without colours), each labelled with
    its alignment score: the working head stands out."""

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
    def _mini(rows: list[list[float]], columns: int, cell: int, depth: str) -> list[Text]:
        if depth != FULL:
            return [Text("".join(shade(v, cell) for v in row[:columns])) for row in rows]
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
        depth, out = depth_of(self), []
        columns, heads = len(self.grids[0][0][0]), len(self.grids[0])
        width = max(self.size.width, 1)
        # Two characters per column (closer to square) when every head still fits.
        cell = 2 if 3 + heads * max(2 * columns + 1, 9) <= width else 1
        box = max(columns * cell + 1, 9)  # room for '▸✗H1 0.94' and a gap
        per_line = max(1, min(heads, (width - 3) // box))  # heads that do not fit wrap below
        for layer, grids in enumerate(self.grids):
            for start in range(0, heads, per_line):
                group = range(start, min(heads, start + per_line))
                minis = [self._mini(grids[h], columns, cell, depth) for h in group]
                for r in range(max(len(m) for m in minis)):
                    line = Text("   " if r or start else f"L{layer + 1} ", style="bold")
                    for mini in minis:
                        line.append_text(mini[r] if r < len(mini) else Text(" " * (columns * cell)))
                        line.append(" " * (box - columns * cell))
                    out.append(line)
                labels = Text("   ")
                for head in group:
                    chosen = (layer, head) == self.selected
                    off = "✗" if (layer, head) in self.off else ""
                    score = f" {self.scores[layer][head]:.2f}" if self.scores else ""
                    labels.append(f"{'▸' if chosen else ' '}{off}H{head + 1}{score}".ljust(box)[:box],
                                  style="bold reverse" if chosen else "")
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
            return Text(f" {self.note or 'no scores yet'}", style="italic dim")
        full = depth_of(self) == FULL
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
                                Style(bgcolor=viridis_hex(score), color=text_colour_on(score)) if full
                                else Style(bold=chosen))
                line.append("]" if chosen else " ", style="bold")
            lines.append(line)
        if self.note:
            lines.append(Text(f" {self.note}", style="dim"))
        text = Text("\n").join(lines)
        text.no_wrap = True
        text.overflow = "crop"
        return text
