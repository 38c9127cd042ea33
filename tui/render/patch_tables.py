"""Activation patching as Rich renderables, and as plain data: the same tables (and the same
JSON) in `minitx patch` and in the app."""

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


def patching_data(result, estimate=None, agreed=None) -> dict:
    """A sweep (core.patching.PatchingResult, or None), its attribution estimate and their
    agreement as plain data: what `minitx patch --json` prints and the app's export key saves."""
    data = result.to_dict() if result is not None else {}
    if estimate is not None:
        data["attribution"] = {**estimate.to_dict(), "stream_all": estimate.stream_all}
    if agreed is not None:
        data["agreement"] = {k: a.to_dict() for k, a in agreed.items()}
    return data


def _token(labels: list[str], position: int) -> str:
    return labels[position] if position < len(labels) else ""


def block_table(values: dict[str, float], n_heads: int) -> Table:
    """{"cross:L2.H1": v, ...} or {"cross:L2.H1 K/V": v, ...} -> a row per block (and side), a
    column per head."""
    table = Table(box=None, padding=(0, 1), header_style="bold")
    table.add_column("block")
    for head in range(n_heads):
        table.add_column(f"H{head + 1}", justify="right")
    blocks: dict[str, list[Text]] = {}
    for name, value in values.items():
        head, _, side = name.partition(" ")
        block = head.split(".")[0] + (f" {side}" if side else "")
        blocks.setdefault(block, []).append(fraction_text(value))
    for block, cells in blocks.items():  # in the order the values come: layer by layer
        table.add_row(block, *cells)
    return table


def heads_table(result, n_heads: int) -> Table:
    return block_table(result.heads, n_heads)


def streams_table(result, task, streams=None, stream_all=None) -> Table:
    """One row per position (the source token fed there, the output produced there), one column
    per stream, so any length fits 80 columns; the last row patches every position at once.
    `streams`/`stream_all` (default: the result's) may be an estimate's."""
    streams = result.streams if streams is None else streams
    stream_all = result.stream_all if stream_all is None else stream_all

    def fraction(name, position):
        values = streams[name]
        return fraction_text(values[position]) if position < len(values) else ""

    encoder = [n for n in streams if n.startswith("enc")]
    decoder = [n for n in streams if n.startswith("dec")]
    table = Table(box=None, padding=(0, 1), header_style="bold")
    for header in ("pos", "source", *encoder, "output", *decoder):
        table.add_column(header.replace(".resid", ""), justify="right")
    source, answer = task.source_labels(result.clean), task.vocab.labels(result.clean_answer)
    for position in range(max(len(source), len(answer))):
        table.add_row(str(position), _token(source, position), *(fraction(n, position) for n in encoder),
                      _token(answer, position), *(fraction(n, position) for n in decoder))
    table.add_row("all", "", *(fraction_text(stream_all[n]) for n in encoder), "",
                  *(fraction_text(stream_all[n]) for n in decoder), style="bold")
    return table


def _runs(result, task) -> list[Text]:
    """Sources through the task's source vocabulary, answers through its target one."""
    whose = [Text("answers: the model's own outputs (the task cannot tell a typed source's)", style="dim")] \
        if result.by_model else []
    return [
        *whose,
        Text(f"clean     {task.format_source(result.clean)}  ->  {task.format(result.clean_answer)}   "
             f"logit difference {result.clean_difference:+.2f}"),
        Text(f"corrupted {task.format_source(result.corrupted)}  ->  {task.format(result.corrupted_answer)}"
             f"   logit difference {result.corrupted_difference:+.2f}"),
        Text(f"recovered fraction (0 corrupted, 1 clean), measured at steps {steps_text(result.steps)}"),
    ]


def patching_report(result, n_heads: int, task, attribution=None, agreements=None) -> Group:
    """core.patching.PatchingResult -> the two runs, then the heads', the cross-attention
    inputs' and the streams' tables (tokens through the task's vocabularies); with an
    attribution of the same pair and its agreements (core/interp/attribution.py), the
    estimate beside them."""
    parts = [
        *_runs(result, task),
        Text(),
        Text("each head's output, all positions", style="bold"),
        heads_table(result, n_heads),
    ]
    if result.inputs:
        parts += [Text(), Text("what each cross-attention head reads (K/V: from the encoder, Q: its query)",
                               style="bold"), block_table(result.inputs, n_heads)]
    parts += [Text(), Text("the residual stream leaving each layer, one position at a time", style="bold"),
              streams_table(result, task)]
    if attribution is not None:
        parts += [Text(), *estimate_parts(attribution, agreements, n_heads)]
    return Group(*parts)


def estimate_parts(attribution, agreements, n_heads: int) -> list:
    """The estimate's heads table and how it agrees with exact patching."""
    parts = [Text("attribution estimate (one corrupted forward and one backward)", style="bold"),
             block_table(attribution.heads, n_heads)]
    if agreements:
        parts += [Text(), *agreement_lines(agreements, attribution)]
    return parts


def _apart(agreement) -> str:
    return ", ".join(f"{name} {exact:+.2f} vs {estimate:+.2f}" for name, exact, estimate in agreement.apart)


def r_text(r) -> str:
    return "r n/a (one side does not vary)" if r is None else f"r = {r:.3f}"


def agreement_lines(agreements: dict, attribution) -> list[Text]:
    """Pearson r of estimate against exact for heads, stream positions and cross-attention
    inputs, the most apart (exact vs estimate), and whether attention is saturated."""
    heads, streams = agreements["heads"], agreements["streams"]
    lines = [Text("estimate against exact patching (Pearson r; most apart: exact vs estimate)", style="bold"),
             Text(f"heads ({heads.count}): {r_text(heads.r)}; {_apart(heads)}"),
             Text(f"stream positions ({streams.count}): {r_text(streams.r)}; {_apart(streams)}")]
    if "inputs" in agreements and agreements["inputs"].count:
        plain, fixed = agreements["inputs"], agreements["inputs_qk"]
        lines.append(Text(f"cross-attention inputs ({fixed.count}): QK fix used (each head's attention "
                          f"recomputed exactly with the clean input) {r_text(fixed.r)}, plain gradient "
                          f"{r_text(plain.r)}; {_apart(fixed)}"))
        saturated = attribution.saturated()
        lines.append(Text("saturated cross-attention (mean top weight >= 0.9): "
                          + (", ".join(saturated) if saturated else "none")))
    return lines


def attribution_report(attribution, pair_result, n_heads: int, task) -> Group:
    """The estimate alone (`minitx patch --method attribution`): the runs, then the estimated
    tables for heads, cross-attention inputs (QK fix) and streams."""
    return Group(
        *_runs(pair_result, task),
        Text(),
        Text("each head's output, estimated (one corrupted forward and one backward)", style="bold"),
        block_table(attribution.heads, n_heads),
        Text(),
        Text("what each cross-attention head reads, estimated with the QK fix", style="bold"),
        block_table(attribution.inputs_qk, n_heads),
        Text(),
        Text("the residual stream leaving each layer, one position at a time, estimated", style="bold"),
        streams_table(pair_result, task, attribution.streams, attribution.stream_all),
    )
