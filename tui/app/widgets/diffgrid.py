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
