"""`minitx align`: word alignments from a model's cross-attention, teacher-forced on each pair's
own target (Pharaoh format), scored against gold alignments, every head at once, and
symmetrized with a reverse model (core/interp/word_alignment.py; docs/alignment.md)."""

from __future__ import annotations

import click

from minitx.tui.cli.common import (
    BadArgument,
    apply_threads,
    checkpoint_found,
    core_choice,
    device_option,
    echo_json,
    json_option,
    language_options,
    load_checkpoint_arg,
    threads_option,
)
from minitx.tui.cli.progress import Progress

CELL = 6  # a percentage cell of the --heads all table, its space included
TABLE_WIDTH = 80


def _shape(model) -> tuple[int, int]:
    """(decoder layers, heads) of a model's cross-attention."""
    return len(model.decoder), model.cfg.n_heads


def chosen_head(model, layer: int | None, head: int | None, which: str = "the model"):
    """The Head --layer and --head name (default: the last layer's mean), checked against the model."""
    from minitx.core.interp.word_alignment import head_of

    try:
        return head_of(*_shape(model), layer, head)
    except ValueError as e:
        raise click.BadParameter(f"{which}: {e}", param_hint="--layer/--head") from None


def head_options(command):
    """--method, --layer and --head: which attention rows align (align, decode --align)."""
    command = click.option(
        "--head", type=click.IntRange(min=1), default=None,
        help="The head of --layer, from 1. [default: the layer's mean over heads]")(command)
    command = click.option("--layer", type=click.IntRange(min=1), default=None,
                           help="The decoder layer to read, from 1. [default: the last]")(command)
    return click.option(
        "--method", type=core_choice("interp.word_alignment", "METHODS"), default="output", show_default=True,
        help="output: the attention of the step that predicts each target piece (Naive-Att); input: of the "
             "step the piece is fed to (Shift-Att).")(command)


@click.command("align", short_help="Word alignments from cross-attention; AER against gold.")
@click.argument("model", metavar="CKPT", callback=checkpoint_found)
@click.argument("pairs", type=click.Path())
@head_options
@click.option("--heads", "every", type=click.Choice(["all"]), default=None,
              help="Score every layer x head and every layer's mean against --gold; name the best.")
@click.option("--gold", type=click.Path(), metavar="GOLD", default=None,
              help="Gold links, a line per pair (talp: i-j sure, ipj possible): print AER, precision "
                   "and recall instead of the links.")
@click.option("--reverse", metavar="CKPT2", default=None, callback=checkpoint_found,
              help="A model trained target to source: its links combined with CKPT's by --sym.")
@click.option("--sym", type=core_choice("interp.word_alignment", "SYMMETRIZATIONS"), default=None,
              help="With --reverse: intersect, union or gdfa (grow-diag-final-and). [default: gdfa]")
@click.option("--batch-size", type=click.IntRange(min=1, max=4096), default=64, show_default=True,
              help="Pairs per teacher-forced pass.")
@language_options
@device_option
@threads_option
@json_option
def align_cmd(model, pairs, method, layer, head, every, gold, reverse, sym, batch_size, device, threads,
              as_json) -> None:
    """Align the words of each pair of PAIRS (.tsv, .csv or .jsonl, as train --data reads them)
    with CKPT's cross-attention, teacher-forced on the pair's own target: one line per pair
    in Pharaoh format (i-j: source word i, target word j, words split at whitespace, from 0).

    Each target piece is linked to the source piece its attention weighs most (special tokens
    and language codes never), and two words are linked when any of their pieces are.
    A pair that cannot be aligned (too long for the model) gets an empty line and a note.

    \b
    Examples:
      minitx align reverse pairs.tsv
      minitx align reverse pairs.tsv --layer 1 --method input
      minitx align reverse pairs.tsv --gold gold.talp --heads all
      minitx align opus-en-de/ en-de.tsv --reverse opus-de-en/ --sym gdfa

    docs/alignment.md: what AER measures, output against input, where gold comes from.
    """
    apply_threads(threads)
    if head is not None and layer is None:
        raise click.UsageError("--head needs --layer (the layer the head is in)")
    if every and (layer is not None or head is not None):
        raise click.UsageError("--heads all reads every layer and head: drop --layer and --head")
    if every and gold is None:
        raise click.UsageError("--heads all scores the heads against gold links: give --gold GOLD")
    if every and reverse is not None:
        raise click.UsageError("--heads all scores one model's heads: drop --reverse")
    if sym is not None and reverse is None:
        raise click.UsageError("--sym combines CKPT's links with a reverse model's: give --reverse CKPT2")
    from minitx.core.data.pair_files import DataError
    from minitx.core.interp import word_alignment as wa

    checkpoint = load_checkpoint_arg(model, device)
    try:
        read = wa.AlignmentPairs(checkpoint.task, pairs, checkpoint.model_config.max_len)
    except DataError as e:
        raise BadArgument(f"PAIRS: {e}") from None
    golden = None
    if gold is not None:
        try:
            golden = wa.read_gold(gold, [p.shape for p in read.pairs], f"{read.path} has")
        except DataError as e:
            raise BadArgument(f"--gold: {e}") from None
    heads = (wa.every_head(*_shape(checkpoint.model)) if every
             else [chosen_head(checkpoint.model, layer, head, "CKPT")])
    with Progress("align", enabled=not as_json) as progress:
        progress.stage(f"reading the attention of {len(read):,} pairs", len(read))
        told = lambda done, total: progress.update(done, total)  # noqa: E731
        if every:
            scores = wa.score_heads(checkpoint.model, read, golden, heads, method, batch_size, told)
            links = None
        else:
            links = wa.align(checkpoint.model, read, heads, method, batch_size, told)[0]
            if reverse is not None:
                links = _symmetrized(links, read, reverse, layer, head, method, sym or "gdfa", batch_size,
                                     device, progress)
            scores = [wa.score(links, golden)] if golden is not None else None
    _notes(read)
    if as_json:
        data = {"checkpoint": str(checkpoint.path), "pairs": read.path, "method": method}
        if reverse is not None:
            data.update(reverse=reverse, symmetrization=sym or "gdfa")
        if scores is not None:
            data["heads"] = [{**h.to_dict(), **s.to_dict()} for h, s in zip(heads, scores)]
            top = wa.best(scores)
            data["best"] = {**heads[top].to_dict(), **scores[top].to_dict()}
        else:
            data["heads"] = [heads[0].to_dict()]
        if links is not None:
            data["links"] = [wa.pharaoh(pair_links) for pair_links in links]
        data["unaligned"] = [{"line": read.pairs[n].line, "reason": why}
                             for n, why in sorted(read.unaligned.items())]
        echo_json(data)
        return
    if scores is None:
        for pair_links in links:
            click.echo(wa.pharaoh(pair_links))
        return
    from pathlib import Path

    what = f"{method} method, {len(read):,} pairs of {Path(read.path).name}, gold {Path(gold).name}"
    if every:
        click.echo(f"AER (%), {what}")
        for line in heads_table(heads, scores):
            click.echo(line)
        top = wa.best(scores)
        click.echo(f"best: {heads[top].name}  {_measures(scores[top])}")
    else:
        name = heads[0].name + (f" with the reverse model's, {sym or 'gdfa'}" if reverse is not None else "")
        click.echo(f"{name}, {what}")
        click.echo(_measures(scores[0]))


def _symmetrized(links, read, reverse: str, layer, head, method: str, how: str, batch_size: int, device: str,
                 progress):
    """CKPT's links combined `how` with those of the reverse model on the pairs swapped."""
    import shutil

    from minitx.core.interp import word_alignment as wa

    backward = load_checkpoint_arg(reverse, device)
    swapped = read.reversed()
    try:
        read_back = wa.AlignmentPairs(backward.task, swapped, backward.model_config.max_len)
        progress.stage(f"reading the reverse model's attention of {len(read):,} pairs", len(read))
        chosen = chosen_head(backward.model, layer, head, "CKPT2")
        back = wa.align(backward.model, read_back, [chosen], method, batch_size,
                        lambda done, total: progress.update(done, total))[0]
    finally:
        shutil.rmtree(swapped.parent, ignore_errors=True)
    for n, why in read_back.unaligned.items():
        read.unaligned.setdefault(n, f"the reverse model: {why}")
    return [frozenset() if n in read.unaligned else wa.symmetrize(f, wa.flipped(b), how)
            for n, (f, b) in enumerate(zip(links, back))]


def _notes(read) -> None:
    if not read.unaligned:
        return
    n, why = min(read.unaligned.items())
    more = f" (and {len(read.unaligned) - 1} more)" if len(read.unaligned) > 1 else ""
    click.echo(f"note: {len(read.unaligned):,} pairs not aligned, their links empty: line "
               f"{read.pairs[n].line}: {why}{more}", err=True)


def _measures(s) -> str:
    return f"AER {s.aer:.1%} · precision {s.precision:.1%} · recall {s.recall:.1%}"


def heads_table(heads, scores, width: int = TABLE_WIDTH) -> list[str]:
    """Lines of AER (%) per layer (rows) and head (columns, the layer's mean last), in column
    blocks that fit `width`."""
    layers = sorted({h.layer for h in heads})
    per_layer = sorted({h.head for h in heads if h.head is not None})
    aer = {(h.layer, h.head): s.aer for h, s in zip(heads, scores)}
    columns = [*per_layer, None]
    fit = max(1, (width - CELL) // CELL)
    lines = []
    for start in range(0, len(columns), fit):
        block = columns[start : start + fit]
        lines.append("layer".ljust(CELL) + "".join(
            ("mean" if c is None else f"H{c + 1}").rjust(CELL) for c in block))
        for layer in layers:
            lines.append(f"L{layer + 1}".ljust(CELL) + "".join(f"{100 * aer[(layer, c)]:.1f}".rjust(CELL)
                                                              for c in block))
    return lines
