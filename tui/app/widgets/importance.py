"""Which heads matter: the importance table (each head ablated alone), with progress while a
worker measures it."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from minitx.tui.app.widgets.redraw import redraw
from minitx.tui.app.widgets.topk import bar

RANKING_FIRST_ROW = 3  # the table's line of the first head (after its title, baseline and header)


class ImportanceTable(Widget):
    DEFAULT_CSS = "ImportanceTable { height: auto; width: 100%; text-wrap: nowrap; text-overflow: clip; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.result = None  # core.importance.Importance
        self.done = self.total = 0
        self.selected = ""  # the head name to highlight, e.g. "cross:L2.H1"
        self.off: set[str] = set()  # heads knocked out on screen

    def show_progress(self, done: int, total: int) -> None:
        self.result, self.done, self.total = None, done, total
        redraw(self)

    def show(self, result, selected: str = "", off=()) -> None:
        self.result, self.selected, self.off = result, selected, set(off)
        redraw(self)

    def render(self) -> Text:
        r = self.result
        if r is None:
            fraction = self.done / self.total if self.total else 0.0
            line = Text("ablating each head alone… ", style="italic")
            line.append(bar(fraction, 10), style="green")
            line.append(f" {self.done}/{self.total or '?'}")
            return line
        lines = [Text(f"each head alone, {r.kind} · {r.examples or f'{r.n} sequences'}", style="bold"),
                 Text(f"with all heads: {r.baseline.accuracy:.1%} exact, loss {r.baseline.loss:.4f}",
                      style="dim"),
                 Text(f"{'':2}{'head':<12}{'exact':>7}{'change':>8}{'loss +':>9}", style="bold")]
        for e in r.heads:
            style = "red" if e.accuracy_change <= -0.05 else "yellow" if e.accuracy_change <= -0.005 else ""
            mark = "▸" if e.head == self.selected else " "
            off = "✗" if e.head in self.off else " "
            line = Text(f"{mark}{off}{e.head:<12}{e.accuracy:>7.1%}{e.accuracy_change:>+8.1%}"
                        f"{e.loss_change:>+9.4f}", style=style)
            if e.head == self.selected:
                line.stylize("reverse")
            lines.append(line)
        lines.append(Text("sorted by the loss it costs · ✗ knocked out now", style="dim"))
        text = Text("\n").join(lines)
        text.no_wrap, text.overflow = True, "crop"
        return text
