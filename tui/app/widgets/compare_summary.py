"""What core.compare measured about two models, in five lines under Compare's grids."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from minitx.tui.render.numbers import percent


class CompareSummary(Static):
    DEFAULT_CSS = "CompareSummary { width: 100%; text-wrap: nowrap; text-overflow: clip; }"

    def show(self, comparison, layer: int, head: int, loading_note: str = "") -> None:
        """comparison: core.compare.Comparison, or None (then loading_note, or 'no summary')."""
        c = comparison
        if c is None:
            self.update(Text(loading_note or "no summary", style="italic dim"))
            return
        where = f"L{layer + 1} H{head + 1}"
        # B's column is the last: its name ('reverse without cross:L1.H2') may take the rest.
        lines = [Text.assemble((f"{'':<18}", ""), (f"A {c.a.name}"[:24].ljust(26), "bold"),
                               (f"B {c.b.name}", "bold"))]

        def pct(v: float) -> tuple[str, str]:
            return (percent(v).ljust(26), "green" if v >= 0.9 else "red" if v < 0.5 else "yellow")

        lines.append(Text.assemble(f"{'exact match':<18}", pct(c.a.accuracy), pct(c.b.accuracy)))

        def align(r) -> str:
            score = r.alignment[layer][head] if layer < len(r.alignment) else float("nan")
            bl, bh, bs = r.best_head
            return f"{score:.2f} (best L{bl + 1} H{bh + 1} {bs:.2f})"

        lines.append(Text.assemble(f"{'alignment ' + where:<18}", align(c.a).ljust(26), align(c.b)))
        differs = [(f.split(".")[-1], x, y) for f, x, y in c.config_diff
                   if f not in ("training.loss", "training.accuracy")][:3]  # those are above

        def values(i: int) -> str:
            return " · ".join("–" if d[i] in ("", None) else str(d[i]) for d in differs)[:25]

        if differs:
            lines.append(Text.assemble(" · ".join(d[0] for d in differs)[:17].ljust(18),
                                       (values(1).ljust(26), "bold"), (values(2), "bold")))
        else:
            lines.append(Text("same model config, task and training summary", style="dim"))
        # A distance over the few tensors two different shapes share would pass for the models'.
        weights = (f"weights ‖A−B‖/‖A‖ {c.weight_distance:.3f}" if c.weight_distance is not None
                   else f"weights: only {c.weights_compared} share a shape")
        lines.append(Text(f"agree on {percent(c.agreement)} of {c.n} sequences · {weights}",
                          style="dim"))
        text = Text("\n").join(lines)
        text.no_wrap, text.overflow = True, "crop"
        self.update(text)
