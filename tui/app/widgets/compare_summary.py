"""What core.compare measured about two models, in five lines under Compare's grids."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from minitx.tui.render.numbers import percent

LABEL, COLUMN = 18, 26  # the row names' width, and A's column: B's takes the rest
SHOWN_ELSEWHERE = ("training.loss", "training.accuracy")  # the exact match row says more


# Config fields whose own name says little on this row ("attention  explicit  fused").
READABLE = {"attention": "attention kernel", "n_encoder_layers": "encoder layers",
            "n_decoder_layers": "decoder layers", "n_heads": "heads", "kv_heads": "K/V heads"}


def differences(config_diff, width: int) -> Text:
    """The row of what differs between the two files ('bug  –  no-causal-mask'): each field once
    (a bug is in the model and the training config alike) by a readable name, only as many as
    fit whole, and how many more fields differ, said in words at the row's end."""
    seen, differs = set(), []
    for field, a, b in config_diff:
        name = field.split(".")[-1]
        if field not in SHOWN_ELSEWHERE and (name, str(a), str(b)) not in seen:
            seen.add((name, str(a), str(b)))
            differs.append((READABLE.get(name, name), "–" if a in ("", None) else str(a),
                            "–" if b in ("", None) else str(b)))
    if not differs:
        return Text("same model config, task and training summary", style="dim")

    def more_words(more: int) -> str:
        return f"  (+{more} more field{'s' * (more > 1)} differ)" if more else ""

    for count in range(len(differs), 0, -1):
        shown, more = differs[:count], len(differs) - count
        names = " · ".join(d[0] for d in shown)
        a, b = (" · ".join(d[i] for d in shown) for i in (1, 2))
        tail = more_words(more)
        if len(names) < LABEL and len(a) < COLUMN and LABEL + COLUMN + len(b) + len(tail) <= width:
            break
    else:  # not even one fits whole: the first, cut at each column's end, and how many more
        tail = more_words(len(differs) - 1)
        names, a = differs[0][0][: LABEL - 1], differs[0][1][: COLUMN - 1]
        b = differs[0][2][: max(1, width - LABEL - COLUMN - len(tail))]
    return Text.assemble(names.ljust(LABEL), (a.ljust(COLUMN), "bold"), (b, "bold"), (tail, "dim"))


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
        lines = [Text.assemble((" " * LABEL, ""), (f"A {c.a.name}"[:COLUMN - 2].ljust(COLUMN), "bold"),
                               (f"B {c.b.name}", "bold"))]

        def pct(v: float) -> tuple[str, str]:
            return (percent(v).ljust(COLUMN), "green" if v >= 0.9 else "red" if v < 0.5 else "yellow")

        lines.append(Text.assemble(f"{'exact match':<{LABEL}}", pct(c.a.accuracy), pct(c.b.accuracy)))

        def align(r) -> str:
            has = layer < len(r.alignment) and head < len(r.alignment[layer])
            bl, bh, bs = r.best_head
            score = f"{r.alignment[layer][head]:.2f}" if has else "none"
            return f"{score} (best L{bl + 1} H{bh + 1} {bs:.2f})"

        lines.append(Text.assemble(f"{'alignment ' + where:<{LABEL}}", align(c.a).ljust(COLUMN), align(c.b)))
        lines.append(differences(c.config_diff, self.size.width or 78))
        # A distance over the few tensors two different shapes share would pass for the models'.
        weights = (f"weights ‖A−B‖/‖A‖ {c.weight_distance:.3f}" if c.weight_distance is not None
                   else f"weights: only {c.weights_compared} share a shape")
        lines.append(Text(f"agree on {percent(c.agreement)} of {c.n} sequences · {weights}",
                          style="dim"))
        text = Text("\n").join(lines)
        text.no_wrap, text.overflow = True, "crop"
        self.update(text)
