"""The next-token probabilities of one decoding step, as horizontal bars."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from minitx.tui.widgets.redraw import redraw

_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(fraction: float, width: int) -> str:
    """A bar of `width` cells filled to `fraction`, with eighth-cell resolution."""
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, rest = divmod(eighths, 8)
    return ("█" * full + (_EIGHTHS[rest] if rest else "")).ljust(width)


class TopKBars(Widget):
    DEFAULT_CSS = "TopKBars { height: auto; width: 100%; text-wrap: nowrap; text-overflow: clip; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.entries: list[tuple[str, float]] = []
        self.hint = "no step yet"

    def show(self, entries: list[tuple[str, float]], hint: str = "") -> None:
        self.entries, self.hint = entries, hint
        redraw(self)

    def render(self) -> Text:
        if not self.entries:
            return Text(self.hint, style="italic dim")
        width = max(4, self.size.width - 13)  # label 6, space, bar, space, '0.97' and slack
        lines = []
        for i, (token, p) in enumerate(self.entries):
            style = "bold" if i == 0 else ""
            line = Text(f"{token:<6} ", style=style)
            line.append(bar(p, width), style="green" if i == 0 else "blue")
            line.append(f" {p:.2f}", style=style)
            lines.append(line)
        text = Text("\n").join(lines)
        text.no_wrap = True
        return text
