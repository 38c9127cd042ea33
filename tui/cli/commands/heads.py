"""`minitx heads`: which heads matter — each ablated alone, sorted by what it costs — and, with
--roles, what each head's attention does (core/interp/roles.py)."""

from __future__ import annotations

import click

from minitx.tui.cli.common import (
    apply_threads,
    checkpoint_found,
    console,
    core_choice,
    device_option,
    echo_json,
    json_option,
    lengths_option_value,
    load_checkpoint_arg,
    pairs_option,
    sample_options,
    threads_option,
)
from minitx.tui.cli.progress import Progress


@click.command("heads", short_help="Per-head importance: each head ablated alone.")
@click.argument("ckpt", required=False, callback=checkpoint_found)
@sample_options("Fresh random sequences each ablated model decodes.")
@click.option("--kind", "kind", type=core_choice("interp.interventions", "ABLATIONS"), default="zero",
              show_default=True,
              help="What an ablated head outputs: 0, or its mean over 256 fresh sources.")
@click.option("--lengths", metavar="MIN-MAX", default=None,
              help="Source lengths. [default: the lengths it was trained on]")
@click.option("--roles", is_flag=True,
              help="Instead: score every head's attention for named patterns (docs/interventions.md).")
@pairs_option()
@device_option
@threads_option
@json_option
def heads_cmd(ckpt, n, seed, kind, lengths, roles, pairs, device, threads, as_json) -> None:
    """Ablate every head of CKPT (default: reverse) alone and measure exact match and loss on
    the same fresh sequences; the heads whose loss costs most come first.

    Heads are named KIND:Ll.Hh (enc: encoder self-attention, self: decoder self-attention,
    cross: cross-attention; layers and heads from 1), as --ablate takes them. Loss is the mean
    cross-entropy of the correct output, teacher-forced.

    With --roles, each head's attention on N fresh sequences (a data model: held-out pairs),
    teacher-forced, is scored 0-1 for each named pattern (diagonal, anti-diagonal, previous
    token, first and last token, broad, the task's expected alignment, token identity), and
    its strongest role named.

    \b
    Examples:
      minitx heads reverse
      minitx heads reverse --kind mean --n 200 --json
      minitx heads sort --roles
    """
    apply_threads(threads)
    from minitx.core.interp.importance import head_importance
    from minitx.core.interp.interventions import all_heads

    checkpoint = load_checkpoint_arg(ckpt, device, pairs)
    task = checkpoint.task
    if roles:
        _roles(checkpoint, n, seed, as_json)
        return
    lo, hi = lengths_option_value(lengths, (task.min_len, task.max_len))
    if (lengths is not None or task.exact_lengths) and hi > checkpoint.model_config.max_len - 2:
        raise click.BadParameter(f"this model takes sources of at most "
                                 f"{checkpoint.model_config.max_len - 2} tokens", param_hint="--lengths")
    out = console()
    with Progress("heads", enabled=not as_json, console=out) as progress:
        progress.stage(f"ablating each head on {task.examples_words(task.sample_size(n))}",
                       len(all_heads(checkpoint.model)))
        result = head_importance(checkpoint.model, task, n=n, seed=seed, kind=kind, min_len=lo, max_len=hi,
                                 progress=lambda done, total: progress.update(done, total))
    if as_json:
        echo_json({"checkpoint": str(checkpoint.path), "task": task.name, "lengths": [lo, hi],
                   **result.to_dict()})
        return
    from rich.markup import escape

    drawn = f" of length {lo}-{hi}, seed {seed}" if task.heldout is None else ""  # fixed pairs: no draw
    out.print(f"[bold]{escape(task.name)}[/]: each head {kind}-ablated alone, "
              f"{escape(result.examples)}{drawn}")
    out.print(f"with every head: exact match {result.baseline.accuracy:.1%}, "
              f"loss {result.baseline.loss:.4f}")
    out.print(_table(result))


def _roles(checkpoint, n, seed, as_json) -> None:
    from minitx.core.interp.roles import ROLE_FLOOR, head_roles

    with Progress("heads", enabled=not as_json, console=console()) as progress:
        progress.stage(f"scoring every head's attention on {n} sequences")
        table = head_roles(checkpoint.model, checkpoint.task, n=n, seed=seed)
    if as_json:
        echo_json({"checkpoint": str(checkpoint.path), "task": checkpoint.task.name, **table.to_dict()})
        return
    from minitx.tui.render.roles_table import roles_table

    out = console()
    out.print(f"[bold]{checkpoint.task.name}[/]: attention mass on each pattern, {n} "
              f"{checkpoint.task.evaluated_on} (seed {seed}), teacher-forced")
    out.print(roles_table(table))
    out.print(f"[dim]- : the pattern does not apply to that kind of head · strongest: the highest score of "
              f"at least {ROLE_FLOOR:.1f} (broad only when nothing else is) · docs/interventions.md[/]")


def _table(result):
    from rich.table import Table

    table = Table(box=None, padding=(0, 1), header_style="bold")
    for column in ("rank", "head", "exact match", "change", "loss", "change"):
        table.add_column(column, justify="left" if column == "head" else "right")
    for rank, e in enumerate(result.heads, 1):
        style = "red" if e.accuracy_change <= -0.05 else "yellow" if e.accuracy_change <= -0.005 else ""
        table.add_row(str(rank), e.head, f"{e.accuracy:.1%}", f"{e.accuracy_change:+.1%}",
                      f"{e.loss:.4f}", f"{e.loss_change:+.4f}", style=style)
    return table
