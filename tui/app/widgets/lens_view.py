"""The logit lens of one decoding step: what each decoder layer would predict there."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from minitx.tui.app.widgets.redraw import redraw
from minitx.tui.app.widgets.topk import bar


class LensTable(Widget):
    """One block per decoder layer: its top tokens with probability bars; the last is the
    model's own prediction."""

    DEFAULT_CSS = "LensTable { height: auto; width: 100%; text-wrap: nowrap; text-overflow: clip; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.predictions: list[list[tuple[str, float]]] = []  # [layer] -> (token, p), most likely first
        self.heading = ""

    def show(self, layers, heading: str = "") -> None:
        self.predictions, self.heading = layers, heading
        redraw(self)

    def render(self) -> Text:
        if not self.predictions:
            return Text("step the decoder (→) to see what each layer predicts", style="italic dim")
        width = max(4, min(24, self.size.width - 22))
        lines = [Text(self.heading, style="bold")] if self.heading else []
        for layer, tops in enumerate(self.predictions):
            last = layer == len(self.predictions) - 1
            name = f"L{layer + 1}" + (" = the model's output" if last else "")
            lines.append(Text(name, style="bold"))
            for i, (token, p) in enumerate(tops):
                line = Text(f"  {token:<6} ", style="bold" if i == 0 else "")
                line.append(bar(p, width), style="green" if i == 0 else "blue")
                line.append(f" {p:.2f}")
                lines.append(line)
        lines.append(Text("the output layer on each layer's stream", style="dim"))
        text = Text("\n").join(lines)
        text.no_wrap, text.overflow = True, "crop"
        return text
