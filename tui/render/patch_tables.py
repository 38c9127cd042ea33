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


def _token(labels: list[str], position: int) -> str:
    return labels[position] if position < len(labels) else ""


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


def streams_table(result, task) -> Table:
    """One row per position (the source token fed there, the output produced there), one column
    per stream, so any length fits 80 columns; the last row patches every position at once."""

    def fraction(name, position):
        values = result.streams[name]
        return fraction_text(values[position]) if position < len(values) else ""

    encoder = [n for n in result.streams if n.startswith("enc")]
    decoder = [n for n in result.streams if n.startswith("dec")]
    table = Table(box=None, padding=(0, 1), header_style="bold")
    for header in ("pos", "source", *encoder, "output", *decoder):
        table.add_column(header.replace(".resid", ""), justify="right")
    source, answer = task.source_labels(result.clean), task.vocab.labels(result.clean_answer)
    for position in range(max(len(source), len(answer))):
        table.add_row(str(position), _token(source, position), *(fraction(n, position) for n in encoder),
                      _token(answer, position), *(fraction(n, position) for n in decoder))
    table.add_row("all", "", *(fraction_text(result.stream_all[n]) for n in encoder), "",
                  *(fraction_text(result.stream_all[n]) for n in decoder), style="bold")
    return table


def patching_report(result, n_heads: int, task) -> Group:
    """core.patching.PatchingResult -> the two runs, then the heads' and the streams' tables
    (sources through the task's source vocabulary, answers through its target one)."""
    whose = ("the model's own greedy outputs (the task cannot tell the answers)"
             if result.answers == "model" else "the task's answers")
    return Group(
        Text(f"clean     {task.format_source(result.clean)}  ->  {task.format(result.clean_answer)}"
             f"   logit difference {result.clean_difference:+.2f}"),
        Text(f"corrupted {task.format_source(result.corrupted)}  ->  {task.format(result.corrupted_answer)}"
             f"   logit difference {result.corrupted_difference:+.2f}"),
        Text(f"recovered fraction (0 corrupted, 1 clean), measured at steps {steps_text(result.steps)}; "
             f"answers: {whose}"),
        Text(),
        Text("each head's output, all positions", style="bold"),
        heads_table(result, n_heads),
        Text(),
        Text("the residual stream leaving each layer, one position at a time", style="bold"),
        streams_table(result, task),
    )
