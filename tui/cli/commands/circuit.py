"""`minitx circuit`: which heads, and which connections between them, carry the answer — path
patching of every sender through every cross-attention input, then the pruned circuit with its
faithfulness measured by running it alone (core/interp/circuit.py)."""

from __future__ import annotations

from pathlib import Path

import click

from minitx.core.wording import counted
from minitx.tui.cli.common import (
    apply_threads,
    checkpoint_found,
    console,
    core_choice,
    device_option,
    echo_json,
    json_option,
    load_checkpoint_arg,
    pairs_option,
    threads_option,
)
from minitx.tui.cli.progress import Progress


@click.command("circuit", short_help="The circuit: heads and edges that keep the answer.")
@click.argument("ckpt", required=False, callback=checkpoint_found)
@click.option("--keep", type=click.FloatRange(min=0, max=1, min_open=True), default=0.9, show_default=True,
              help="The share of the logit difference the circuit must keep.")
@click.option("--n-pairs", "n_pairs", type=click.IntRange(min=1, max=512), default=32, show_default=True,
              help="Clean/corrupted pairs the scores and the faithfulness are measured on.")
@pairs_option()
@click.option("--seed", type=click.IntRange(min=0), default=1234, show_default=True,
              help="Which pairs are drawn.")
@click.option("--n", "n", type=click.IntRange(min=1), default=200, show_default=True,
              help="Sequences the circuit alone decodes for its exact match.")
@click.option("--ablation", type=core_choice("interp.interventions", "ABLATIONS"), default="mean",
              show_default=True,
              help="What a head outside the circuit outputs: its mean over 256 fresh sources, or 0.")
@click.option("--svg", "svg", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also draw the circuit as SVG: heads by layer and kind, kept edges between them.")
@device_option
@threads_option
@json_option
def circuit_cmd(ckpt, keep, n_pairs, pairs, seed, n, ablation, svg, device, threads, as_json) -> None:
    """Find the circuit of CKPT (default: reverse): the heads, and the sender -> receiver edges
    between them, that keep at least --keep of the clean logit difference when everything outside
    the circuit is mean-ablated (--ablation zero: zero-ablated).

    First each head is patched alone, and path patching measures each sender (an encoder or
    decoder self-attention head) through each input of each cross-attention head: its keys and
    values (what the encoder gives it) or its query (what the decoder asks). Then heads and
    edges are pruned greedily, the smallest effects first, as long as the circuit keeps --keep.
    Faithfulness is 0 for every head ablated and 1 for the whole model, always measured
    by running the circuit alone; so is its exact match on --n fresh sequences (a data model:
    held-out pairs).

    Pairs are two examples of the same length with known, different answers: fresh sequences,
    fresh dates, a data model's held-out pairs, or those of a --pairs file (docs/interventions.md).

    \b
    Examples:
      minitx circuit reverse
      minitx circuit sort --keep 0.8 --svg sort-circuit.svg
      minitx circuit copy --json
      minitx circuit reverse --ablation zero
    """
    apply_threads(threads)
    if svg is not None and Path(svg).is_dir():
        raise click.BadParameter(f"{svg} is a folder; give a file name", param_hint="--svg")
    from minitx.core.interp.circuit import find_circuit
    from minitx.core.interp.pairs import draw_pairs, source_lengths

    checkpoint = load_checkpoint_arg(ckpt, device, pairs)
    model, task = checkpoint.model, checkpoint.task
    try:
        pairs = draw_pairs(task, n_pairs, seed, model.cfg.eos_id)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    out = console()
    try:
        with Progress("circuit", enabled=not as_json, console=out) as progress:
            progress.stage("finding the circuit")
            result = find_circuit(model, task, pairs, keep=keep, accuracy_n=n, ablation=ablation,
                                  progress=lambda stage, done, total: progress.update(done, total, stage))
    except ValueError as e:  # pairs the model cannot tell apart
        raise click.UsageError(str(e)) from None
    if svg is not None:
        _write_svg(svg, checkpoint, result)
    if as_json:
        lo, hi = source_lengths(task, pairs)
        echo_json({"checkpoint": str(checkpoint.path), "task": task.name, "seed": seed,
                   "lengths": [lo, hi], "svg": svg, **result.to_dict()})
        return
    _report(out, checkpoint, pairs, seed, result, svg)


def _report(out, checkpoint, pairs, seed, result, svg) -> None:
    from rich.text import Text

    from minitx.core.interp.pairs import source_lengths
    from minitx.tui.render.circuit_tables import circuit_summary, path_tables

    task = checkpoint.task
    lo, hi = source_lengths(task, pairs)
    lengths = f"{lo}" if lo == hi else f"{lo}-{hi}"
    count = counted(len(pairs), "patching pair")
    out.print(f"[bold]{task.name}[/]: {count} drawn from {task.evaluated_on} (seed {seed}), sources of "
              f"length {lengths}; logit difference {result.model_difference:+.2f} with every head, "
              f"{result.empty_difference:+.2f} with every head {result.ablation}-ablated")
    out.print(Text("path patching: a sender's effect through one cross-attention input, every other "
                   "head frozen at the corrupted run (% of the logit difference recovered)"))
    out.print()
    for part in path_tables(result.paths, min(out.width, 80)):
        out.print(part)
    out.print()
    out.print(circuit_summary(result, checkpoint.model_config.n_heads))
    if svg is not None:
        out.print(f"drawn in {svg}")


def _write_svg(path: str, checkpoint, result) -> None:
    from minitx.tui.render.circuit_diagram import Shape, circuit_svg

    circuit = result.circuit
    title = (f"{checkpoint.task.name}: {len(circuit.heads)} of {result.total_heads} heads, "
             f"{len(circuit.edges)} edges, faithfulness {result.faithfulness:.3f}, "
             f"exact match {result.accuracy:.1%} alone")
    edges = [(e.sender, e.receiver.head, e.receiver.side) for e in sorted(circuit.edges)]
    text = circuit_svg(Shape.of(checkpoint.model), circuit.heads, edges, title, result.paths.edges)
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise click.BadParameter(f"cannot write {path}: {e.strerror or e}", param_hint="--svg") from None
