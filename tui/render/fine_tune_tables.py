"""Base against fine-tuned as Rich tables (`minitx compare`, the app's Compare summary):
the scores on the pairs, outputs side by side, which layers and which heads moved.
Everything comes from core.fine_tune_diff.FineTuneDiff; nothing is computed here."""

from __future__ import annotations

from rich.console import Group
from rich.markup import escape
from rich.table import Table

OUTPUT_ROWS = 5  # pairs shown side by side (JSON has them all)
TOP = 3  # layers and heads listed as the ones that moved most


def _table(*columns: str) -> Table:
    table = Table(header_style="bold")
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right")
    return table


def _number(value: float | None, digits: str = ".4g") -> str:
    return "-" if value is None else format(value, digits)


def scores_table(diff, names: tuple[str, str]) -> Table:
    """Loss per target token, BLEU and chrF, A beside B."""
    table = _table("", f"A: {names[0]}", f"B: {names[1]}")
    table.add_row("loss per target token", _number(diff.a.loss), _number(diff.b.loss))
    table.add_row("BLEU", _number(diff.a.bleu, ".2f"), _number(diff.b.bleu, ".2f"))
    table.add_row("chrF", _number(diff.a.chrf, ".2f"), _number(diff.b.chrf, ".2f"))
    return table


def scores_section(diff, names: tuple[str, str]):
    heading = f"[bold]on {diff.n} pairs[/]: loss, BLEU and chrF (sacrebleu)"
    if diff.text_skipped:
        return heading, Group(scores_table(diff, names), f"no BLEU or chrF: {escape(diff.text_skipped)}")
    return heading, scores_table(diff, names)


def outputs_section(diff, rows: int = OUTPUT_ROWS):
    """The first pairs: source, reference, A's and B's outputs (B's in yellow where it differs)."""
    table = Table(header_style="bold", show_lines=True)
    for column in ("source", "reference", "A", "B"):
        table.add_column(column, overflow="fold")
    for row in diff.outputs[:rows]:
        b = escape(row.b) if row.b == row.a else f"[yellow]{escape(row.b)}[/]"
        table.add_row(escape(row.source), escape(row.reference), escape(row.a), b)
    changed = sum(row.a != row.b for row in diff.outputs)
    heading = (f"[bold]outputs side by side[/]: the first {min(rows, len(diff.outputs))} of "
               f"{len(diff.outputs)}; B's output differs from A's on {changed}")
    return heading, table


def layers_section(diff, top: int = TOP):
    """Every layer's |dW| / |W|, the most moved bold."""
    heading = "[bold]which layers moved[/]: |B - A| / |A| over each layer's weights"
    if diff.layers_skipped:
        return heading, escape(diff.layers_skipped)
    moved = {c.layer for c in diff.moved_layers(top)}
    table = _table("layer", "tensors", "|dW| / |W|")
    for c in diff.layers:
        cells = (c.layer, str(c.tensors), f"{c.relative:.4g}")
        table.add_row(*(f"[bold]{x}[/]" for x in cells) if c.layer in moved and c.relative else cells)
    return heading, table


def adapters_section(diff):
    """A LoRA fine-tune's adapted layers and their update sizes, a row each."""
    heading = "[bold]LoRA adapters[/]: B's update ||scale B A|| / ||W|| per adapted layer, on A's weight"
    table = _table("adapted layer", "update size")
    for c in diff.adapters:
        table.add_row(c.module, f"{c.size:.4g}")
    return heading, table


def heads_section(diff, top: int = TOP):
    """Each decoder layer's cross-attention heads: change 0 to 1, a row per layer."""
    heading = ("[bold]which heads moved[/]: cross-attention change per head (total variation "
               "distance, 0 to 1, mean over the pairs' target positions)")
    if diff.heads_skipped:
        return heading, escape(diff.heads_skipped)
    heads = max(c.head for c in diff.heads)
    moved = {(c.layer, c.head) for c in diff.moved_heads(top) if c.change}
    table = _table("layer", *(f"H{h}" for h in range(1, heads + 1)))
    for layer in sorted({c.layer for c in diff.heads}):
        cells = [f"[bold]{c.change:.3f}[/]" if (c.layer, c.head) in moved else f"{c.change:.3f}"
                 for c in diff.heads if c.layer == layer]
        table.add_row(f"L{layer}", *cells)
    return heading, table


def fine_tune_sections(diff, names: tuple[str, str]) -> list[tuple[str, object]]:
    """(heading, body) of each part, in the order `minitx compare` prints them."""
    return [scores_section(diff, names), outputs_section(diff), layers_section(diff),
            *([adapters_section(diff)] if diff.adapters else []), heads_section(diff)]


def changes_summary(diff, names: tuple[str, str], label: int = 18, column: int = 26):
    """Five lines, the app's Compare summary box with `c`: the scores of A and B, how many
    outputs differ, the layers and the heads that moved most."""
    from rich.text import Text

    def scores(side) -> str:
        return f"{_number(side.loss, '.3g')} · {_number(side.bleu, '.1f')} · {_number(side.chrf, '.1f')}"

    layers = (diff.layers_skipped if diff.layers_skipped else
              " · ".join(f"{c.layer} {c.relative:.3g}" for c in diff.moved_layers()))
    heads = (diff.heads_skipped if diff.heads_skipped else
             " · ".join(f"L{c.layer} H{c.head} {c.change:.3f}" for c in diff.moved_heads()))
    changed = sum(row.a != row.b for row in diff.outputs)
    lines = [
        Text.assemble(" " * label, (f"A {names[0]}"[: column - 2].ljust(column), "bold"),
                      (f"B {names[1]}", "bold")),
        Text.assemble("loss, BLEU, chrF".ljust(label), scores(diff.a).ljust(column), scores(diff.b)),
        Text.assemble("outputs".ljust(label),
                      f"B's differs from A's on {changed} of {len(diff.outputs)} examples" if diff.outputs
                      else "not side by side: the models read different examples"),
        Text.assemble("layers moved".ljust(label), (layers, "bold" if not diff.layers_skipped else "dim")),
        Text.assemble("heads moved".ljust(label), (heads, "bold" if not diff.heads_skipped else "dim")),
    ]
    text = Text("\n").join(lines)
    text.no_wrap, text.overflow = True, "crop"
    return text
