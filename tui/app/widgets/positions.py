"""The positional encoding as a heatmap (positions x dimensions) and the position-similarity
matrix: at position 0 every sine is 0 and every cosine 1, and nearby positions look alike."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from minitx.tui.app.widgets.redraw import redraw
from minitx.tui.render.colors import viridis_hex


def _shade(value: float, scale: float = 1.0) -> str:
    """A value in [-scale, scale] on the viridis map (-scale dark, scale bright)."""
    return viridis_hex((value / scale + 1) / 2)


class PositionsView(Widget):
    """Left: one row per position, one character per (sin, cos) pair of dimensions — the left
    half is the sine, the right half the cosine. Right: cosine similarity of positions, two rows
    per character."""

    DEFAULT_CSS = "PositionsView { height: auto; width: 100%; text-wrap: nowrap; text-overflow: clip; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.table: list[list[float]] | None = None  # (positions, d)
        self.similarity: list[list[float]] = []  # (positions, positions)
        self.kind = "sinusoidal"  # the model's position_encoding
        self.numbers = False  # the values as text (what # asks for; all there is without colour)

    def show(self, table, similarity, kind: str = "sinusoidal", numbers: bool = False) -> None:
        self.table, self.similarity, self.kind, self.numbers = table, similarity, kind, numbers
        redraw(self)

    def _as_numbers(self) -> Text:
        """The first dimensions and the similarity matrix as numbers, as many as fit."""
        width = max(self.size.width, 1)
        dims = max(1, min(len(self.table[0]), (width - 4) // 6))
        lines = [Text(f"pos  dimensions 0-{dims - 1}", style="bold")]
        for p, row in enumerate(self.table):
            lines.append(Text(f"{p:>3} " + "".join(f"{v:>6.2f}" for v in row[:dims])))
        shown = max(1, min(len(self.similarity), (width - 4) // 5))
        lines += [Text(), Text(f"similarity of positions 0-{shown - 1} (cosine)", style="bold")]
        for p, row in enumerate(self.similarity[:shown]):
            lines.append(Text(f"{p:>3} " + "".join(f"{v:>5.2f}" for v in row[:shown])))
        text = Text("\n").join(lines)
        text.no_wrap, text.overflow = True, "crop"
        return text

    def render(self) -> Text:
        if self.table is None:  # short lines: the box is 46 characters wide at 80 columns
            why = ("rotary: the positions turn the queries\nand keys of each self-attention"
                   if self.kind == "rope" else "it has no positions at all")
            return Text(f"this model adds no positional table;\n{why}", style="italic dim")
        if self.numbers:
            return self._as_numbers()
        positions, d = len(self.table), len(self.table[0]) if self.table else 0
        pairs = d // 2
        width = max(self.size.width, 1)
        shown_pairs = max(1, min(pairs, width - 4))
        sines = self.kind == "sinusoidal"
        scale = 1.0 if sines else max(1e-6, max(abs(v) for row in self.table for v in row))
        pair = "(sin ▌cos)" if sines else "(learned, decoder side)"
        lines = [Text(f"pos  dimension pairs 0-{shown_pairs - 1} {pair}"
                      + (f", {pairs - shown_pairs} more →" if shown_pairs < pairs else ""), style="bold")]
        for p, row in enumerate(self.table):
            line = Text(f"{p:>3} ", style="bold")
            for i in range(shown_pairs):
                sin, cos = _shade(row[2 * i], scale), _shade(row[2 * i + 1], scale)
                line.append("▌", Style(color=sin, bgcolor=cos))
            lines.append(line)
        key = Text(f"{-scale:.2g} ", style="dim")
        for i in range(9):
            key.append("  ", Style(bgcolor=_shade(-1 + i / 4)))
        key.append(f" {scale:.2g}" + ("  row 0: sin 0, cos 1" if sines else ""), style="dim")
        lines.append(key)
        lines.append(Text())
        # Nearby positions share their slow dimensions, so similarities sit well above -1:
        # colour from the lowest one shown (dark) to 1 (bright) to make the bands visible.
        low = min(min(row) for row in self.similarity)
        span = max(1e-6, 1 - low)

        def shade(value: float) -> str:
            return viridis_hex((value - low) / span)

        lines.append(Text(f"similarity 0-{positions - 1} (cosine, {low:.2f} dark → 1)", style="bold"))
        for top in range(0, positions, 2):
            line = Text(f"{top:>3} ", style="bold")
            for j in range(positions):
                upper = shade(self.similarity[top][j])
                lower = shade(self.similarity[top + 1][j]) if top + 1 < positions else None
                line.append("▀▀", Style(color=upper, bgcolor=lower))
            lines.append(line)
        text = Text("\n").join(lines)
        text.no_wrap, text.overflow = True, "crop"
        return text
