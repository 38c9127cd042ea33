"""Attention pictures: one head's grid, every head as a small grid, and a table of scores.

The widgets take plain lists of floats (already computed by core) and only draw them. One head's
grid is tui/render/grid.py's, the renderer the command line prints too; the widget adds the window
of columns a grid wider than itself shows, following the step's strongest column (< and > move it),
the window of rows a grid taller than its box shows, following the current step, and a zoom
(wide cells: each subword piece whole). Every head at once draws small grids while they fit, and
for a model of many heads (48 in opus-mt) each head's row of the current step.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from minitx.tui.app.widgets.redraw import redraw
from minitx.tui.render.colors import FULL, depth_of, shade, text_colour_on, viridis_hex
from minitx.tui.render.grid import CELL, Layout, fit, grid_lines, legend

_NO_WRAP = "height: auto; width: 100%; text-wrap: nowrap; text-overflow: clip;"
ROLE_NAMES = {"anti-diagonal": "anti-diag"}  # core's role names, in at most ROLE_WIDTH characters
ROLE_WIDTH = 9


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
        self.first_column = 0  # the first column shown when not every column fits
        self.follow_step = True  # keep the current row's strongest weight in view (until scrolled)
        self.compact = compact  # no blank line above the legend (the Train screen's probe)
        self.zoom = False  # wide cells: each column label whole, a window of the columns
        self.first_row: int | None = None  # the first row shown when scrolled (None: follow the step)
        self._shown_rows = range(0)  # the rows of the last drawing
        self.under: tuple[str, list[float], str] | None = None  # (label, values, mark) under the current row
        self.note = ""  # what the row under the current one is, under the grid
        self.unit, self.signed = "weight", False  # what the legend says a colour is
        self.window_of: AttentionGrid | None = None  # a grid beside this one whose columns it shows

    def show(self, rows, columns, row_labels, current=None, hint="", axes="", causal=False, *,
             under: tuple[str, list[float], str] | None = None, note: str = "", unit: str = "weight",
             signed: bool = False) -> None:
        """under: a row drawn right under the current one (the step's attribution); note: a line
        under the grid saying what it is; unit, signed: the legend's words (tui/render/grid.py)."""
        if columns != self.columns:
            self.first_column = 0  # another source: start from its first token
        if columns != self.columns or current != self.current:
            self.follow_step = True  # a new step: show what it attends to
            self.first_row = None  # ... and its row
        self.rows, self.columns, self.row_labels = rows, columns, row_labels
        self.current, self.hint, self.axes, self.causal = current, hint, axes, causal
        self.under, self.note, self.unit, self.signed = under, note, unit, signed
        redraw(self)

    def scroll_columns(self, pages: int) -> None:
        """Move the window of columns by `pages` windows (when not every column fits)."""
        visible = self.cell_layout().visible
        moved = self.first_column + pages * max(1, visible - 2)  # a window, keeping two columns
        self.first_column = max(0, min(len(self.columns) - visible, moved))
        self.follow_step = False
        redraw(self)

    @property
    def cropped(self) -> bool:
        """Not every column fits: a window of them is shown and < > move it."""
        return bool(self.size.width) and self.cell_layout().visible < len(self.columns)

    def toggle_zoom(self) -> None:
        self.zoom = not self.zoom
        self.follow_step = True
        redraw(self)

    def cell_layout(self) -> Layout:
        """How the grid fits the widget's width (tui/render/grid.py's fit)."""
        return fit(self.row_labels, len(self.columns), self.size.width, self.columns if self.zoom else None)

    def _room(self) -> int:
        """Lines the grid's box has (0: unknown, unbounded): the widget grows with its content
        inside a scrolling box, so the box's height is what a person sees."""
        box = self.parent
        return box.scrollable_content_region.height if box is not None and box.size.height else 0

    def _rows_window(self, extra: int) -> range:
        """The rows shown: all of them, or as many as the box holds with `extra` lines besides,
        ending at the current step (the newest row while stepping forward) unless ↑ ↓ scrolled."""
        count, room = len(self.rows), self._room()
        fits = room - extra - 1  # the header of column labels
        if not room or count <= fits:
            self._shown_rows = range(count)
            return self._shown_rows
        fits = max(1, fits - 1)  # and the line saying which rows these are
        if self.first_row is None:
            last = min(count, (self.current if self.current is not None else fits - 1) + 1)
            first = max(0, last - fits)
        else:
            first = self.first_row = max(0, min(count - fits, self.first_row))
        self._shown_rows = range(first, first + fits)
        return self._shown_rows

    @property
    def rows_cropped(self) -> bool:
        """Not every row fits its box: a window of them is shown and ↑ ↓ move it."""
        return len(self._shown_rows) < len(self.rows)

    def scroll_rows(self, lines: int) -> None:
        self.first_row = self._shown_rows.start + lines
        redraw(self)

    def _window(self, visible: int) -> range:
        """The columns shown: from `offset`, moved so that the current row's strongest weight
        is in view (stepping never hides what the new token attends to)."""
        if self.window_of is not None and self.window_of.columns == self.columns:
            # the same source tokens as the grid beside it (whose width may differ by a cell)
            return self.window_of._window(self.window_of.cell_layout().visible)
        count = len(self.columns)
        row = self.rows[self.current] if self.current is not None and self.current < len(self.rows) else []
        if self.follow_step and row:
            peak = max(range(len(row)), key=row.__getitem__)
            if not self.first_column <= peak < self.first_column + visible:
                self.first_column = peak - visible // 2
        self.first_column = max(0, min(count - visible, self.first_column))
        return range(self.first_column, min(count, self.first_column + visible))

    def render(self) -> Text:
        depth = depth_of(self)
        layout = self.cell_layout()
        shown = self._window(layout.visible)
        cropped = len(shown) < len(self.columns)
        extra = cropped + bool(self.hint) + (not self.compact) + 1 + bool(self.axes)  # lines below
        extra += bool(self.under) + bool(self.note)  # the row under the current one, and its note
        rows = self._rows_window(extra)
        lines = grid_lines(self.rows, self.columns, self.row_labels, layout, numbers=self.numbers,
                           depth=depth, current=self.current, causal=self.causal, shown=shown,
                           shown_rows=rows, under_current=self.under)
        if self.note:
            lines.append(Text(self.note, style="italic"))
        room = self.size.width or 80  # a narrow grid (Y's two at 60 columns) says each line shorter
        if len(rows) < len(self.rows):
            where = f"{rows.start + 1}-{rows.stop} of {len(self.rows)}"
            said = (f"rows {where} · ↑ ↓ scroll", f"rows {where} · ↑ ↓", f"{where} ↑ ↓", where)
            lines.append(Text(_fitting(said, room), style="bold"))
        if cropped or self.zoom:
            zoom = " · z all" if self.zoom else " · z wide"
            where = f"{shown.start + 1}-{shown.stop} of {len(self.columns)}"
            said = (f"columns {where} · < > scroll{zoom}", f"columns {where} · < >", f"{where} < >", where)
            lines.append(Text(_fitting(said, room), style="bold"))
        if self.hint:
            lines.append(Text(self.hint, style="italic dim"))
        if not self.compact:
            lines.append(Text())
        lines.append(legend(depth, self.size.width or 80, self.numbers and layout.cell < CELL, self.unit,
                            self.signed))
        if self.axes:  # 'rows: tokens generated · columns: source tokens', or shorter where narrow
            short = self.axes.replace("rows: ", "↓ ").replace("columns: ", "→ ")
            lines.append(Text(_fitting((self.axes, short, short.split(" · ")[0]), room), style="dim"))
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
        self.roles: list[list[str]] | None = None  # [layer][head] -> its strongest role ("": none)
        self.roles_why = ""  # why the roles are not shown ("": they are being measured)

    def show(self, grids, scores, selected, off=(), note: str | None = None, roles=None,
             roles_why: str = "") -> None:
        """roles: each head's strongest role under its label (None: not measured yet, or
        `roles_why` says why they cannot be)."""
        self.grids, self.scores, self.selected, self.off = grids, scores, selected, set(off)
        self.roles, self.roles_why = roles, roles_why
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
        box = self.parent
        room = box.scrollable_content_region.height if box is not None and box.size.height else 0
        # Counted, not drawn: building 48 heads' grids only to find they do not fit took a frame
        fits = not room or self._grids_height() <= room
        text = Text("\n").join(self._grids() if fits else self._rows_of_this_step(room))
        text.no_wrap = True
        text.overflow = "crop"
        return text

    def _rows_of_this_step(self, room: int) -> list[Text]:
        """Every head's last few steps (this one at the bottom), its source in as many bins as
        fit (each bin its strongest weight): a few lines per layer, for models whose heads'
        grids do not fit (48 heads in opus-mt's shape)."""
        depth, heads, layers = depth_of(self), len(self.grids[0]), len(self.grids)
        width = max(self.size.width, 1)
        bins = max(1, min(len(self.grids[0][0][-1]), (width - 4) // heads - 1))
        per_layer = max(1, min(3, (room - 5) // layers))  # header, a blank line and three of legend
        steps = min(len(self.grids[0][0]), per_layer * (2 if depth == FULL else 1))
        header = Text("    ")
        for head in range(heads):
            chosen = self.selected[1] == head
            header.append(f"H{head + 1}".ljust(bins + 1)[: bins + 1],
                          style="bold reverse" if chosen else "bold")
        out = [header]
        for layer, grids in enumerate(self.grids):
            minis = []
            for head in range(heads):
                rows = [_binned(row, bins) for row in grids[head][-steps:]]
                minis.append([Text("✗".center(bins), style="bold red")] if (layer, head) in self.off
                             else self._mini(rows, bins, 1, depth))
            for r in range(max(len(m) for m in minis)):
                mark = ("▸" if self.selected[0] == layer else " ") + f"L{layer + 1} " if not r else "    "
                line = Text(mark, style="bold")
                for mini in minis:
                    line.append_text(mini[r] if r < len(mini) else Text(" " * bins))
                    line.append(" ")
                out.append(line)
        out.append(Text())
        what = "this step" if steps == 1 else f"the last {steps} steps, this one lowest"
        out.append(Text(f"each head: {what};", style="dim"))
        out.append(Text(f"the source in {bins} bins, each its largest weight", style="dim"))
        out.append(Text(self.note + (" · ✗ knocked out" if self.off else ""), style="dim"))
        return out

    def _grids_layout(self) -> tuple[int, int, int]:
        """(cell, box, per_line) of the small grids: the characters per column, per head (its
        label's room included) and the heads per line."""
        columns, heads = len(self.grids[0][0][0]), len(self.grids[0])
        width = max(self.size.width, 1)
        # Two characters per column (closer to square) when every head still fits.
        label = ROLE_WIDTH + 1 if self.roles is not None else 9  # '▸✗H1 0.94', or 'anti-diag', and a gap
        cell = 2 if 3 + heads * max(2 * columns + 1, label) <= width else 1
        box = max(columns * cell + 1, label)
        return cell, box, max(1, min(heads, (width - 3) // box))  # heads that do not fit wrap below

    def _grids_height(self) -> int:
        """The lines _grids() would draw."""
        _, _, per_line = self._grids_layout()
        rows, heads = len(self.grids[0][0]), len(self.grids[0])
        group = (rows + 1) // 2 if depth_of(self) == FULL else rows  # two rows a line with ▀
        group += 1 + (self.roles is not None)  # the labels, the roles
        return len(self.grids) * (-(-heads // per_line) * group + 1) + 2

    def _grids(self) -> list[Text]:
        """Every head's grid, small, with its label (and role) under it."""
        depth, out = depth_of(self), []
        columns, heads = len(self.grids[0][0][0]), len(self.grids[0])
        cell, box, per_line = self._grids_layout()
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
                if self.roles is not None:  # each head's strongest role, under its label
                    roles = Text("   ")
                    for head in group:
                        role = self.roles[layer][head] if layer < len(self.roles) else ""
                        roles.append(f" {ROLE_NAMES.get(role, role) or '·'}".ljust(box)[:box], style="italic")
                    out.append(roles)
            out.append(Text())
        out.append(Text(self.note + (" · ✗ knocked out" if self.off else ""), style="dim"))
        out.append(Text("under each: its strongest role (· none clear)" if self.roles is not None
                        else f"each head's role: {self.roles_why or 'measuring…'}", style="dim"))
        return out


def _binned(row: list[float], bins: int) -> list[float]:
    """A row of weights in `bins` consecutive bins, each its largest weight: a peak stays a peak."""
    edges = [round(i * len(row) / bins) for i in range(bins + 1)]
    return [max(row[edges[b]:max(edges[b + 1], edges[b] + 1)]) for b in range(bins)]


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

    CELL = 6  # ' 0.93 ' or '[0.93]'
    LABEL = 3  # ' L2', the cell's own space after it

    def heads_per_row(self) -> int:
        """As many heads side by side as the width holds (4 in the 30-column side panel); more
        heads go on in blocks below, each with its own header (H5-H8, ...)."""
        width = self.size.width or 4 * self.CELL + self.LABEL
        return max(1, (width - self.LABEL) // self.CELL)

    def selected_line(self) -> int:
        """The line the selected head's score is on (a scrolling box keeps it in view)."""
        if self.selected is None or not self.scores:
            return 0
        layer, head = self.selected
        block = head // self.heads_per_row()
        return block * (len(self.scores) + 1) + 1 + layer

    def render(self) -> Text:
        if not self.scores:
            return Text(f" {self.note or 'no scores yet'}", style="italic dim")
        full = depth_of(self) == FULL
        heads, per_row = len(self.scores[0]), self.heads_per_row()
        lines = []
        for first in range(0, heads, per_row):  # every head, in blocks as wide as the box
            shown = range(first, min(heads, first + per_row))
            lines.append(Text(" " * self.LABEL + "".join(f"H{h + 1}".center(self.CELL) for h in shown),
                              style="bold"))
            for layer, row in enumerate(self.scores):
                line = Text(f" L{layer + 1}".ljust(self.LABEL), style="bold")
                for head in shown:
                    score, chosen = row[head], (layer, head) == self.selected
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


def _fitting(said: tuple[str, ...], room: int) -> str:
    """The first of `said` (longest first) that fits `room` columns, else the shortest: a line
    says less where the grid is narrow, never a word cut in two."""
    return next((line for line in said if len(line) <= room), said[-1])
