"""`minitx lab [VARIANT ...]`: the components lab (core/lab.py) on the command line."""

from __future__ import annotations

import sys

import click

from minitx.core.wording import counted
from minitx.tui.cli import model_options
from minitx.tui.cli.common import (
    LazyChoice,
    apply_threads,
    console,
    device_option,
    echo_json,
    task_names,
    threads_option,
)
from minitx.tui.cli.progress import Progress

EXIT_INTERRUPTED = 130


def _seeds(text: str) -> list[int]:
    """'0,1' or '0-2' -> [0, 1] or [0, 1, 2]."""
    seeds: list[int] = []
    try:
        for part in text.replace(" ", "").split(","):
            lo, _, hi = part.partition("-")
            seeds.extend(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise click.BadParameter(f"expected seeds such as 0,1 or 0-2, got {text!r}",
                                 param_hint="--seeds") from None
    if not seeds or min(seeds) < 0:
        raise click.BadParameter(f"expected seeds such as 0,1 or 0-2, got {text!r}", param_hint="--seeds")
    return list(dict.fromkeys(seeds))


@click.command("lab", short_help="Train component swaps side by side and compare them.")
@click.argument("variants", nargs=-1, metavar="[VARIANT ...]")
@model_options.recipe_option
@click.option("--task", type=LazyChoice(task_names), help="What to learn. [default: recipe]")
@click.option("--lengths", metavar="MIN-MAX", default="4-10", show_default=True,
              help="Source lengths to train and evaluate on.")
@click.option("--beyond", metavar="MIN-MAX", default="11-16", show_default=True,
              help="Longer source lengths, never trained on, to evaluate after training.")
@click.option("--seeds", default="0,1", show_default=True,
              help="Seeds (initialisation and data), e.g. 0,1 or 0-4; every variant runs each.")
@click.option("--steps", type=click.IntRange(min=1), help="Training steps per run. [default: recipe]")
@click.option("--eval-every", type=click.IntRange(min=1), default=50, show_default=True,
              help="Held-out evaluation period, the resolution of 'steps to target'.")
@click.option("--eval-size", type=click.IntRange(min=1), default=500, show_default=True,
              help="Fresh sequences per evaluation.")
@click.option("--target", type=click.FloatRange(0, 1, min_open=True), default=0.99, show_default=True,
              help="Held-out exact match that counts as learned.")
@device_option
@threads_option
@click.option("--quiet", "-q", is_flag=True, help="No progress, only the table.")
@click.option("--json", "as_json", is_flag=True, help="Print every run as JSON.")
@model_options.apply(model_options.MODEL_OPTIONS)
def lab_cmd(variants, recipe, task, lengths, beyond, seeds, steps, eval_every, eval_size, target,
            device, threads, quiet, as_json, **model_values) -> None:
    """Train VARIANTs of one model side by side, on the same task, data and seeds, and print
    one table of what each swap changed: parameters, steps to the target held-out exact match,
    final accuracy, accuracy on longer sources than any trained on, and training speed.

    \b
    Variants (join with +, e.g. rope+swiglu):
      baseline  the recipe's model          rms      RMSNorm for LayerNorm
      pre-norm  norms before each sublayer  learned  learned position tables
      rope      rotary positions            none     no positions at all
      gelu      GELU for ReLU               swiglu   SwiGLU feed-forward
      gqa       2 K/V heads for 4 heads     mqa      1 K/V head for all
      modern    pre-norm + rms + rope + swiglu + gqa
    [default: baseline rms learned rope swiglu gqa modern]

    \b
    Examples:
      minitx lab baseline rope              # the recipe's model, and it with RoPE
      minitx lab baseline learned rope none --steps 600 --threads 1
      minitx lab --task sort baseline none  # sorting needs no positions
      minitx lab baseline modern --seeds 0-2 --json > lab.json

    The base is the recipe (--recipe, default fast) with the model options given (--d-model,
    --layers, ... as in `minitx train`); each variant swaps parts of that base and trains it
    for the recipe's steps, and every variant sees the same batches for a seed.
    docs/components.md explains each swap and has a measured table. Ctrl-C prints the runs
    finished so far.
    """
    apply_threads(threads)
    from minitx.core.lab import DEFAULT_VARIANTS, LabPlan, run_lab, summarise, variant_options
    from minitx.core.options import parse_lengths

    names = list(dict.fromkeys(variants or DEFAULT_VARIANTS))
    for name in names:
        try:
            variant_options(name)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="VARIANT") from None
    try:
        beyond_range = parse_lengths(beyond)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--beyond") from None
    seed_list = _seeds(seeds)
    model_cfg, train_cfg = model_options.configs(
        *model_options.recipe_configs(recipe),
        {**model_values, "task": task, "lengths": lengths, "device": device, "steps": steps})
    if beyond_range[0] <= train_cfg.max_source_len:
        raise click.BadParameter(f"lengths {beyond} are not beyond the trained {lengths}",
                                 param_hint="--beyond")
    plan = LabPlan(model_cfg, train_cfg, train_cfg.steps, eval_every, eval_size, target, beyond_range)
    for name in names:  # options a variant cannot take with this recipe, e.g. too few heads
        try:
            plan.configs(name, seed_list[0])
        except ValueError as e:
            raise click.UsageError(f"{name}: {e}") from None
    total = len(names) * len(seed_list)
    runs = []
    try:
        with Progress("lab", enabled=not (quiet or as_json)) as progress:
            progress.stage(f"seed {seed_list[0]} ({len(names)} variants in turn)", plan.steps)

            def advanced(seed: int, step: int) -> None:
                progress.update(step, plan.steps, f"seed {seed} ({len(names)} variants in turn)")

            for run in run_lab(plan, names, seed_list, progress=advanced):
                runs.append(run)
                progress.print(_finished(run, len(runs), total, plan))
    except KeyboardInterrupt:
        click.echo(f"interrupted: {len(runs)} of {total} runs finished (a seed's runs finish "
                   "together)", err=True)
        if runs:
            _report(plan, summarise(plan, runs), as_json)
        sys.exit(EXIT_INTERRUPTED)
    _report(plan, summarise(plan, runs), as_json)


def _finished(run, done: int, total: int, plan) -> str:
    reached = f"{plan.target:.0%} at step {run.steps_to_target}" if run.steps_to_target else \
        f"{plan.target:.0%} not reached"
    return (f"[{done}/{total}] seed {run.seed} {run.variant}: {reached} · final "
            f"{run.final_accuracy:.1%} · beyond {run.beyond_accuracy:.1%} · "
            f"{run.steps_per_s:.1f} steps/s")


def _by_length_table(rows, plan):
    """Accuracy on each length beyond training: where generalisation stops."""
    from rich.table import Table

    lengths = sorted({n for row in rows for n in row.beyond_by_length})
    table = Table(title="beyond, by source length", title_justify="left")
    table.add_column("variant")
    for n in lengths:
        table.add_column(str(n), justify="right")
    for row in rows:
        by_length = row.beyond_by_length
        table.add_row(row.variant, *(f"{by_length[n]:.1%}" if n in by_length else "-" for n in lengths))
    return table


def _report(plan, rows, as_json: bool) -> None:
    if as_json:
        echo_json({"plan": {"recipe_model": plan.model.to_dict(), "recipe_train": plan.train.to_dict(),
                            "steps": plan.steps, "eval_every": plan.eval_every,
                            "eval_size": plan.eval_size, "target": plan.target,
                            "beyond": list(plan.beyond)},
                   "variants": [row.to_dict() for row in rows]})
        return
    from rich.table import Table

    lo, hi = plan.beyond
    trained = f"{plan.train.min_source_len}-{plan.train.max_source_len}"
    table = Table(title=f"{plan.train.task}: {counted(plan.steps, 'step')}, seeds "
                        f"{', '.join(str(r.seed) for r in rows[0].runs)}", title_justify="left")
    for column in ("variant", "params", f"steps to {plan.target:.0%}", f"final {trained}",
                   f"beyond {lo}-{hi}", "steps/s"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    first = rows[0].steps_per_s
    for row in rows:
        reached = ", ".join(str(s) if s else f">{plan.steps}" for s in row.steps_to_target)
        table.add_row(row.variant, f"{row.params:,}", reached, f"{row.final_accuracy:.1%}",
                      f"{row.beyond_accuracy:.1%}", f"{row.steps_per_s:.1f} ({row.steps_per_s / first:.2f}x)")
    out = console()
    out.print(table)
    out.print(_by_length_table(rows, plan))
    out.print(f"held-out exact match of greedy decoding on {plan.eval_size} fresh sequences, "
              f"every {counted(plan.eval_every, 'step')}; steps to {plan.target:.0%}: one per seed; final "
              f"and beyond: means over seeds; steps/s: median, and its ratio to {rows[0].variant}'s")
    for row in rows:
        out.print(f"  {row.variant}: {row.parts}")
