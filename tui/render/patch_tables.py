"""Activation patching as Rich renderables: the same tables in `minitx patch` and in the app."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text


def steps_text(steps: list[int]) -> str:
    """0-based steps -> '1-5, 7' (1-based, as every step minitx shows)."""
    runs: list[list[int]] = []
    for t in steps:
        if runs and t == runs[-1][-1] + 1:
            runs[-1].append(t)
        else:
            runs.append([t])
    return ", ".join(f"{r[0] + 1}-{r[-1] + 1}" if len(r) > 1 else str(r[0] + 1) for r in runs)


def fraction_text(value: float) -> Text:
    """A recovered fraction, coloured by how much of the clean answer it brings back (the number
    is always there: without colour it is all there is)."""
    style = "bold green" if value >= 0.5 else "green" if value >= 0.1 else "red" if value <= -0.1 else "dim"
    return Text(f"{value:+.2f}", style=style)


def _token(ids: list[int], position: int, vocab) -> str:
    return vocab.label(ids[position]) if position < len(ids) else ""


def heads_table(result, n_heads: int) -> Table:
    table = Table(box=None, padding=(0, 1), header_style="bold")
    table.add_column("block")
    for head in range(n_heads):
        table.add_column(f"H{head + 1}", justify="right")
    blocks: dict[str, list[Text]] = {}
    for name, value in result.heads.items():
        blocks.setdefault(name.split(".")[0], []).append(fraction_text(value))
    for block, cells in blocks.items():
        table.add_row(block, *cells)
    return table


def streams_table(result, vocab) -> Table:
    """One row per position (the source token, the output produced there), one column per
    stream, so any length fits 80 columns; the last row patches every position at once."""

    def fraction(name, position):
        values = result.streams[name]
        return fraction_text(values[position]) if position < len(values) else ""

    encoder = [n for n in result.streams if n.startswith("enc")]
    decoder = [n for n in result.streams if n.startswith("dec")]
    table = Table(box=None, padding=(0, 1), header_style="bold")
    for header in ("pos", "source", *encoder, "output", *decoder):
        table.add_column(header.replace(".resid", ""), justify="right")
    for position in range(len(result.clean_answer)):
        table.add_row(str(position), _token(result.clean, position, vocab),
                      *(fraction(n, position) for n in encoder), _token(result.clean_answer, position, vocab),
                      *(fraction(n, position) for n in decoder))
    table.add_row("all", "", *(fraction_text(result.stream_all[n]) for n in encoder), "",
                  *(fraction_text(result.stream_all[n]) for n in decoder), style="bold")
    return table


def patching_report(result, n_heads: int, vocab) -> Group:
    """core.patching.PatchingResult -> the two runs, then the heads' and the streams' tables
    (tokens through the model's vocabulary)."""
    return Group(
        Text(f"clean     {vocab.text(result.clean)}  ->  {vocab.text(result.clean_answer)}   "
             f"logit difference {result.clean_difference:+.2f}"),
        Text(f"corrupted {vocab.text(result.corrupted)}  ->  {vocab.text(result.corrupted_answer)}   "
             f"logit difference {result.corrupted_difference:+.2f}"),
        Text(f"recovered fraction (0 corrupted, 1 clean), measured at steps {steps_text(result.steps)}"),
        Text(),
        Text("each head's output, all positions", style="bold"),
        heads_table(result, n_heads),
        Text(),
        Text("the residual stream leaving each layer, one position at a time", style="bold"),
        streams_table(result, vocab),
    )
