"""The next-token probabilities of one decoding step, as horizontal bars."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from minitx.tui.app.widgets.redraw import redraw
from minitx.tui.render.text_fit import end_cut

_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(fraction: float, width: int) -> str:
    """A bar of `width` cells filled to `fraction`, with eighth-cell resolution."""
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, rest = divmod(eighths, 8)
    return ("█" * full + (_EIGHTHS[rest] if rest else "")).ljust(width)


def log_p_text(log_p: float) -> str:
    """A log-probability in six characters: '-0.00' would hide how sure a trained model is, so
    values near 0 are written as '-3e-04'."""
    if log_p >= -0.005:
        return f"{log_p:.0e}".replace("e-0", "e-") if log_p < 0 else "0.00"
    return f"{log_p:.2f}"


class TopKBars(Widget):
    """Bars of probability, each labelled with its log-probability; the entropy below."""

    DEFAULT_CSS = "TopKBars { height: auto; width: 100%; text-wrap: nowrap; text-overflow: clip; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.entries: list[tuple[str, float, float]] = []  # (token, p, log p)
        self.hint = "no step yet"
        self.footnote = ""

    def show(self, entries, hint: str = "", footnote: str = "") -> None:
        """entries: (token, p) or (token, p, log p), most likely first."""
        self.entries = [(e[0], e[1], e[2] if len(e) > 2 else float("nan")) for e in entries]
        self.hint, self.footnote = hint, footnote
        redraw(self)

    def render(self) -> Text:
        if not self.entries:
            return Text(self.hint, style="italic dim")
        # the labels as wide as the longest (6 at least, a third of the panel at most: a longer
        # piece ends in …), a space, the bar, a space and '-13.20': the figure is never cut
        label = min(max(6, *(len(e[0]) for e in self.entries)), max(6, self.size.width // 3))
        width = max(4, self.size.width - label - 8)
        lines = []
        for i, (token, p, log_p) in enumerate(self.entries):
            style = "bold" if i == 0 else ""
            token = end_cut(token, label)
            line = Text(f"{token:<{label}} ", style=style)
            line.append(bar(p, width), style="green" if i == 0 else "blue")
            shown = f"{p:.2f}" if log_p != log_p else log_p_text(log_p)  # NaN: no log-probability
            line.append(f" {shown:>6}", style=style)
            lines.append(line)
        if self.footnote:
            lines.append(Text(self.footnote, style="dim"))
        text = Text("\n").join(lines)
        text.no_wrap = True
        return text
