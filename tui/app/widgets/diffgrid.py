"""|A−B| of two models' attention on the same source, cell by cell, and which tokens differ."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from minitx.tui.render.colors import FULL, depth_of, diff_hex, shade


def short_token(token: str) -> str:
    return (token.strip("<>") if len(token) > 3 else token)[:3]  # <eos> -> eos


def difference(rows_a: list[list[float]], rows_b: list[list[float]]) -> list[list[float] | None]:
    """|a−b| per cell of two already-computed grids (rows only one side has: None)."""
    out: list[list[float] | None] = []
    for i in range(max(len(rows_a), len(rows_b))):
        if i < len(rows_a) and i < len(rows_b):
            out.append([abs(x - y) for x, y in zip(rows_a[i], rows_b[i])])
        else:
            out.append(None)
    return out


class DiffGrid(Widget):
    """|A−B| per cell; each row labelled 'tokenA=tokenB' or 'tokenA≠tokenB' (≠ in red)."""

    DEFAULT_CSS = "DiffGrid { height: auto; width: 100%; text-wrap: nowrap; text-overflow: clip; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[list[float] | None] = []
        self.tokens: list[tuple[str, str]] = []
        self.columns: list[str] = []
        self.cell = 2  # characters per column; 4 prints the numbers (three and a gap)

    def show(self, rows, tokens, columns, cell=2) -> None:
        self.rows, self.tokens, self.columns, self.cell = rows, tokens, columns, cell
        self.refresh(layout=True)

    def render(self) -> Text:
        cell, depth = self.cell, depth_of(self)
        numbers = cell == 4
        header = Text(" " * 7)
        for column in self.columns:
            header.append(short_token(column)[:3].center(cell), style="bold")
        lines = [header]
        for row, (a, b) in zip(self.rows, self.tokens):
            same = a == b
            line = Text(f"{short_token(a):>3}")
            line.append("=" if same else "≠", style="dim" if same else "bold red")
            line.append(f"{short_token(b):<3}")
            for value in row or [None] * len(self.columns):
                if value is None:
                    line.append("·".center(cell), style="dim")
                elif numbers:
                    label = f"{value:.2f}"[1:] if value < 0.995 else "1.0"
                    line.append(label, Style(bgcolor=diff_hex(value), color="#ffffff") if depth == FULL
                                else Style(bold=value >= 0.5))
                    line.append(" ")
                elif depth == FULL:
                    line.append(" " * cell, Style(bgcolor=diff_hex(value)))
                else:
                    line.append(shade(value, cell))
            lines.append(line)
        if not self.rows:
            lines.append(Text("step (→) to compare", style="italic dim"))
        lines.append(Text())
        key = Text("0 ", style="dim")
        for i in range(4):
            if depth == FULL:
                key.append("  ", Style(bgcolor=diff_hex(i / 3)))
            else:
                key.append(shade(i / 3, 2))
        key.append(" 1", style="dim")
        lines.append(key)
        text = Text("\n").join(lines)
        text.no_wrap, text.overflow = True, "crop"
        return text


def show_difference(box, grid: DiffGrid, panels: list, width: int) -> None:
    """Compare's |A−B| of the head shown, in `box` (hidden when one model lacks that head, no
    grids are shown, or the screen's `width` leaves no room beside A's and B's grids)."""
    if not all(p.session.has_selected_head and p.session.view_mode == "grid" for p in panels):
        box.display = False
        return
    a, b = (p.grid for p in panels)
    n = max(len(a.row_labels), len(b.row_labels))
    pairs = [(a.row_labels[i] if i < len(a.row_labels) else "",
              b.row_labels[i] if i < len(b.row_labels) else "") for i in range(n)]
    ends = [p.session.record.task.vocab.tokens[p.session.record.task.vocab.eos] for p in panels]
    pairs = [(x, x) if (x, y) == tuple(ends) else (x, y) for x, y in pairs]  # </s> = <eos>
    # Source positions line up by the source's own tokens: a model whose code wrapped its
    # sources (an imported one) has a start and an end column the other may lack.
    spans = [_own_columns(p.session) for p in panels]
    rows_a, rows_b = ([row[start:stop] for row in g.rows] for g, (start, stop) in zip((a, b), spans))
    columns = a.columns[spans[0][0]:spans[0][1]]
    cell = _diff_cell(len(columns), panels[0].session.numbers, width)
    box.display = cell > 0
    if cell:
        box.styles.width = max(16, 11 + cell * len(columns))  # label 7, edges, scrollbar
        grid.show(difference(rows_a, rows_b), pairs, columns, cell)


def _diff_cell(columns: int, numbers: bool, width: int) -> int:
    """Characters per |A−B| column: A's and B's grids get room first (label, three or four
    characters a column, border); the difference shrinks to one character, or hides."""
    spare = width - 2 * (10 + (4 if numbers else 3) * columns)
    for cell in ((4, 1) if numbers else (2, 1)):
        if 11 + cell * columns <= spare:
            return cell
    return 0


def _own_columns(session) -> tuple[int, int]:
    """(start, stop) of the columns of a session's grid that hold the source's own tokens: all of
    them, or all but the start and end tokens of a wrapped source."""
    ids = session.stepper.src_ids if session.stepper is not None else []
    own = session.record.task.source_length(ids)
    start = 1 if own < len(ids) else 0
    return start, start + own
