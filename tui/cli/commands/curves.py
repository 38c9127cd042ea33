"""`minitx curves`: the training curves of one or several runs, drawn in the terminal or exported."""

from __future__ import annotations

import io
import json
from pathlib import Path

import click

CHART_NAMES = ["loss", "bleu", "chrf", "accuracy", "lr", "grad_norm", "general_loss", "kl_to_base",
               "lora_updates", "aer"]


@click.command("curves", short_help="Training curves of runs: charts, CSV or JSON.")
@click.argument("runs", nargs=-1, required=True, metavar="CKPT|METRICS.jsonl...")
@click.option("--chart", "charts", multiple=True, type=click.Choice(CHART_NAMES), metavar="NAME",
              help=f"Which chart, of {', '.join(CHART_NAMES)}; repeat for several. [default: loss "
                   "and BLEU where the evaluations scored text (a fine-tune), else loss and accuracy]")
@click.option("--x", "x_axis", type=click.Choice(["step", "time"]), default="step", show_default=True,
              help="Horizontal axis: optimiser step, or training time.")
@click.option("--scale", type=click.Choice(["log", "linear"]), default="log", show_default=True,
              help="Vertical scale of the loss and grad norm charts.")
@click.option("--smooth", is_flag=True, help="Draw a moving average (weight 0.9) instead of raw steps.")
@click.option("--height", type=click.IntRange(min=2, max=200), default=9, show_default=True,
              help="Plotted rows per chart (its legend and axes take 3 or 4 more lines).")
@click.option("--format", "fmt", type=click.Choice(["chart", "csv", "json"]), default="chart",
              show_default=True, help="Draw charts, or export every recorded point.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write to this file instead of stdout.")
def curves_cmd(runs, charts, x_axis, scale, smooth, height, fmt, out) -> None:
    """Draw the training curves that checkpoints (or --metrics files) recorded, one run or
    several overlaid, or export them as CSV or JSON.

    \b
    Examples:
      minitx curves run.safetensors             # loss (log scale), accuracy
      minitx curves a.safetensors b.safetensors --chart loss --smooth
      minitx curves run.jsonl --chart lr --chart grad_norm --x time
      minitx curves run.safetensors --format csv --out run.csv
      minitx curves ft.safetensors --chart general_loss  # forgetting
      minitx curves ft.safetensors --chart bleu --chart chrf  # base at step 0
      minitx curves lora.safetensors --chart lora_updates  # each adapter's size

    A checkpoint keeps at most 2,000 points per series (thinned evenly, first and last kept);
    a --metrics file has every step. docs/curves.md explains what is recorded.
    """
    loaded = _load_runs(runs)
    if fmt == "chart":
        text = _charts(loaded, list(charts) or default_charts([h for _, _, h in loaded]), x_axis,
                       scale == "log", smooth, height, out)
    else:
        text = _csv(loaded) if fmt == "csv" else _json(loaded)
    if out is None:
        click.echo(text, nl=False)
        return
    from minitx.core.checkpoint import write_atomic

    write_atomic(Path(out), text.encode("utf-8"))
    click.echo(f"wrote the curves of {len(loaded)} run(s) to {out}", err=True)


def default_charts(histories) -> list[str]:
    """Loss and BLEU where any run's evaluations scored text (a translation fine-tune's), else
    loss and held-out exact match."""
    return ["loss", "bleu" if any(h.score_steps for h in histories) else "accuracy"]


def _load_runs(runs: tuple[str, ...]) -> list[tuple[str, str, object]]:
    """(label, where, History) for each run that has a history; a note for each that has none."""
    from minitx.core.history import HistoryError, history_from_metrics
    from minitx.tui.cli.common import BadArgument, load_checkpoint_arg

    loaded, missing = [], []
    for run in runs:
        if run.endswith(".jsonl"):
            try:
                history = history_from_metrics(run)
            except HistoryError as e:  # missing or malformed: a bad argument, like a bad checkpoint
                raise BadArgument(str(e)) from None
            where = run
        else:
            ckpt = load_checkpoint_arg(run)
            history, where = ckpt.history, str(ckpt.path)
        if history is None or history.empty:
            missing.append(run)
            continue
        loaded.append((_label(run, [label for label, _, _ in loaded]), where, history))
    if not loaded:
        raise click.ClickException(f"no curves to show: {', '.join(missing)} recorded none (trained "
                                   "before minitx kept curves, or exported)")
    for run in missing:
        click.echo(f"note: {run} holds no training curves (trained before minitx kept them, or "
                   "exported)", err=True)
    return loaded


def _label(run: str, taken: list[str]) -> str:
    label = Path(run).name
    for suffix in (".safetensors", ".jsonl"):
        label = label.removesuffix(suffix)
    unique, n = label, 2
    while unique in taken:
        unique, n = f"{label} ({n})", n + 1
    return unique


def _charts(loaded, charts, x_axis, log, smooth, height, out) -> str:
    from rich.console import Console, Group
    from rich.text import Text

    from minitx.tui.cli.common import console
    from minitx.tui.render.charts import chart_text, curve_of, update_sizes_text

    terminal = console() if out is None else Console(file=io.StringIO(), width=100, color_system=None)
    width = max(40, terminal.width)
    parts = [_summary(label, history, width) for label, _, history in loaded]
    for chart in charts:
        if chart == "lora_updates":  # a table per run: each adapted layer's update size
            parts += [Text(""), *(Text.assemble((f"{label}\n", "bold"),
                                                update_sizes_text(history, width, height * len(loaded) + 200))
                                  for label, _, history in loaded)]
            continue
        curves = [curve_of(label, history, chart, x_axis, smooth) for label, _, history in loaded]
        parts += [Text(""), chart_text(curves, chart, width, log=log, x_axis=x_axis, plot_rows=height)]
    recorder = Console(file=io.StringIO(), width=width, record=True,
                       color_system=terminal.color_system, no_color=terminal.no_color)
    recorder.print(Group(*parts), crop=True)
    text = recorder.export_text(styles=terminal.color_system is not None)
    return "\n".join(line.rstrip(" ") for line in text.split("\n"))


def _summary(label: str, history, width: int):
    """A run in a line or two, broken between fields: 'a · steps 1-120 · loss 1.245 · exact
    match 42.0% at 120 · best 42.0% at 100'. Best is the best complete evaluation: one that
    stopped early (train --until) measured too few examples to count."""
    from minitx.tui.cli.common import field_lines

    steps, losses = history.series("loss")
    evaluations = history.evaluations()
    parts = [label]
    if steps:
        parts.append(f"steps {steps[0]}-{steps[-1]} · loss {losses[-1]:.4g}")
    if evaluations:
        step, accuracy, n, complete = evaluations[-1]
        if complete:
            parts.append(f"exact match {accuracy:.1%} at {step}")
        else:
            examples = f" after {n:,} examples" if n else ""
            parts.append(f"last evaluation (step {step}) stopped early{examples}")
        best = history.best_accuracy()
        parts.append(f"best {best[1]:.1%} at {best[0]}" if best else "no complete evaluation")
    score_steps, bleu = history.series("bleu")
    if score_steps:  # from the first scored evaluation (a fine-tune's base) to the last
        parts.append(f"BLEU {bleu[0]:.2f} at {score_steps[0]} -> {bleu[-1]:.2f} at {score_steps[-1]}")
    return field_lines(parts, width)


def _csv(loaded) -> str:
    """One row per recorded point: run, series, step, training seconds at that step, value."""
    from minitx.tui.render.csv_files import curves_csv

    return curves_csv([(label, history) for label, _, history in loaded])


def _json(loaded) -> str:
    runs = [{"name": label, "path": where, "history": history.to_dict()} for label, where, history in loaded]
    return json.dumps({"runs": runs}, indent=2) + "\n"
