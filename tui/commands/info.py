"""`minitx eval`, `minitx inspect` and `minitx list`: what a checkpoint is and how good it is."""

from __future__ import annotations

import json

import click

from minitx.tui.commands.common import (
    ablate_options,
    ablated_name,
    apply_threads,
    console,
    echo_json,
    interventions_for,
    json_option,
    lengths_option_value,
    load_checkpoint_arg,
    sample_options,
    shown_value,
    threads_option,
)


@click.command("eval", short_help="Exact-match accuracy on fresh sequences.")
@click.argument("ckpt", required=False)
@sample_options("Fresh random sequences to decode.")
@click.option(
    "--lengths",
    metavar="MIN-MAX",
    default=None,
    help="Source lengths, e.g. 4-10 or 12-16. [default: the lengths it was trained on]",
)
@click.option("--failures", "show_failures", type=click.IntRange(min=0), default=0, metavar="N",
              help="Also list up to N wrong outputs, each with the step where it first goes wrong.")
@ablate_options()
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="cpu", show_default=True)
@threads_option
@json_option
def eval_cmd(ckpt, n, seed, lengths, show_failures, ablate, ablate_kind, device, threads, as_json) -> None:
    """Exact-match accuracy of CKPT (default: reverse) on fresh random sequences.

    \b
    Examples:
      minitx eval reverse --n 1000
      minitx eval my-run.safetensors --lengths 11-20 --json    # does it generalise?
      minitx eval reverse --ablate cross:L2 --failures 5      # without layer 2's cross-attention
    """
    apply_threads(threads)
    from minitx.core.train import evaluate

    checkpoint = load_checkpoint_arg(ckpt, device)
    task = checkpoint.task
    lo, hi = lengths_option_value(lengths, (task.min_len, task.max_len))
    limit = checkpoint.model_config.max_len - 2
    if hi > limit:
        raise click.BadParameter(
            f"this model takes sources of at most {limit} tokens, not {hi}", param_hint="--lengths"
        )
    interventions = interventions_for(checkpoint, ablate, ablate_kind)
    with interventions.applied(checkpoint.model):
        result = evaluate(checkpoint.model, task, n=n, seed=seed, min_len=lo, max_len=hi)
        failures = _failures(checkpoint, n, seed, lo, hi, show_failures)
    if as_json:
        echo_json(
            {
                "checkpoint": str(checkpoint.path),
                "task": task.name,
                "n": result.n,
                "seed": seed,
                "lengths": [lo, hi],
                "accuracy": result.accuracy,
                "by_length": {str(k): v for k, v in sorted(result.by_length.items())},
                "ablated": [str(h) for h in interventions.ablated],
                "ablate_kind": ablate_kind if interventions.ablated else None,
                **({"failures": [f.to_dict() for f in failures]} if show_failures else {}),
            }
        )
        return
    correct = round(result.accuracy * result.n)
    if interventions.ablated:
        click.echo(ablated_name(task.name, interventions, checkpoint.model_config.n_heads))
    click.echo(
        f"{task.name}: exact match {result.accuracy:.1%} ({correct}/{result.n}) "
        f"on fresh sequences of length {lo}-{hi}, seed {seed}"
    )
    for length, acc in sorted(result.by_length.items()):
        note = "" if task.min_len <= length <= task.max_len else "  (not trained on)"
        click.echo(f"  length {length:>3}  {acc:7.1%}  {_bar(acc)}{note}")
    if show_failures:
        _print_failures(failures, result.n - correct)


def _failures(checkpoint, n: int, seed: int, lo: int, hi: int, limit: int) -> list:
    if not limit:
        return []
    from minitx.core.failures import find_failures

    return find_failures(checkpoint.model, checkpoint.task, n=n, seed=seed, limit=limit,
                         min_len=lo, max_len=hi)[0]


def _print_failures(failures, wrong: int) -> None:
    """Each failure on two lines: source and step, then what came out against what should have,
    the first wrong token marked."""
    from minitx.core.tasks import Task

    if not failures:
        click.echo("no wrong outputs")
        return
    click.echo(f"first {len(failures)} of {wrong} wrong outputs ([ ] marks the first wrong token):")
    for f in failures:
        click.echo(f"  {Task.format(f.source)}  wrong from step {f.first_wrong + 1}")
        click.echo(f"    got      {_marked(f.output, f.first_wrong)}")
        click.echo(f"    expected {_marked(f.expected, f.first_wrong)}")


def _marked(ids: list[int], step: int) -> str:
    """'5 1 [6] 1 3': the tokens up to EOS (shown only where it is the marked one), the token at
    `step` in brackets; a sequence that ended before `step` gets '[ ]'."""
    from minitx.core.tasks import EOS, Task

    words = [Task.format([i], strip_special=False) for i in ids]
    if len(words) <= step:
        words += ["[ ]"]
    else:
        words[step] = f"[{words[step]}]"
    if ids and ids[-1] == EOS and len(ids) - 1 != step:
        words.pop()
    return " ".join(words)


def _bar(fraction: float, width: int = 20) -> str:
    full = round(fraction * width)
    return "█" * full + "·" * (width - full)


def inspect_data(ckpt) -> dict:
    """Everything `inspect` shows, as plain data."""
    from minitx.core.alignment import random_alignment_scores
    from minitx.core.checkpoint import describe_size
    from minitx.core.components import components
    from minitx.core.model import block_parameters, parameter_breakdown
    from minitx.core.tasks import VOCAB

    meta = ckpt.metadata
    try:  # informational only: a file without it (or with a broken one) is still inspectable
        train_cfg = json.loads(meta["train_config"])
    except (KeyError, ValueError, TypeError, RecursionError):
        train_cfg = None
    return {
        "path": str(ckpt.path),
        "file_size_bytes": ckpt.path.stat().st_size,
        "file_size": describe_size(ckpt.path),
        "dtype": ckpt.dtype,
        "format_version": meta.get("format_version"),
        "minitx_version": meta.get("minitx_version"),
        "resumable": ckpt.resumable,
        "task": {
            **ckpt.task.to_dict(),
            "description": ckpt.task.description,
            "expected_alignment": ckpt.task.alignment_name,
        },
        "vocabulary": list(VOCAB),
        "model_config": ckpt.model_config.to_dict(),
        "train_config": train_cfg,
        "parameters": parameter_breakdown(ckpt.model),
        "blocks": block_parameters(ckpt.model),
        "components": components(ckpt.model_config),
        "alignment": {  # rows are decoder layers, columns heads; 256 fresh sequences
            "expected": ckpt.task.alignment_name,
            "scores": [
                [round(float(s), 4) for s in row] for row in random_alignment_scores(ckpt.model, ckpt.task)
            ],
        },
        "training": ckpt.summary,
        "history": ckpt.history.to_dict() if ckpt.history is not None else None,
    }


def describe_history(history) -> str:
    """One line: how much of the run the file's history holds (or that it holds none)."""
    if history is None or history.empty:
        return "history: none (a file from before minitx kept curves, or an export)"
    parts = []
    steps = list(history.steps)
    if steps:
        parts.append(f"{len(steps)} points of steps {steps[0]}-{steps[-1]}")
    evals, accuracy = history.series("accuracy")
    if evals:
        best = max(range(len(evals)), key=lambda i: accuracy[i])
        parts.append(f"{len(evals)} evaluations (best {accuracy[best]:.1%} at step {evals[best]})")
    if history.snapshot_steps:
        parts.append(f"{len(history.snapshot_steps)} attention snapshots")
    return "history: " + ", ".join(parts) + " · draw it: minitx curves FILE"


@click.command("inspect", short_help="Config, task, parameters and training summary.")
@click.argument("ckpt", required=False)
@json_option
def inspect_cmd(ckpt, as_json) -> None:
    """Config, task, vocabulary, parameter counts and training summary of CKPT (default: reverse).

    \b
    Examples:
      minitx inspect reverse
      minitx inspect my-run.safetensors --json
    """
    checkpoint = load_checkpoint_arg(ckpt)
    info = inspect_data(checkpoint)
    if as_json:
        echo_json(info)
        return
    from rich.table import Table

    out = console()
    task = info["task"]
    out.print(
        f"[bold]{info['path']}[/]  {info['file_size']} · {info['dtype']} · format "
        f"v{info['format_version']} · minitx {info['minitx_version']} · "
        f"{'resumable' if info['resumable'] else 'inference only'}"
    )
    out.print(
        f"task [bold]{task['name']}[/]: {task['description']}, lengths {task['min_len']}-"
        f"{task['max_len']}; a trained model's cross-attention is {task['expected_alignment']}"
    )
    out.print("vocabulary " + " ".join(f"{i}:{t}" for i, t in enumerate(info["vocabulary"])))
    params = Table(title="parameters", title_justify="left")
    params.add_column("component")
    params.add_column("count", justify="right")
    params.add_column("share", justify="right")
    total = info["parameters"]["total"]
    for name, count in info["parameters"].items():
        share = "" if name == "total" else f"{count / total:.1%}"
        params.add_row(name, f"{count:,}", share, style="bold" if name == "total" else None)
    out.print(params)
    out.print(_blocks_table(info["blocks"], info["components"]))
    out.print(f"positions: {info['components']['positions']}")
    out.print(_alignment_table(info["alignment"]))
    from rich.columns import Columns

    panels = [_key_values("model", info["model_config"])]
    if info["train_config"]:
        panels.append(_key_values("training config", info["train_config"]))
    panels.append(_key_values("training summary", info["training"]))
    out.print(Columns(panels))
    out.print(describe_history(checkpoint.history), markup=False)


def _blocks_table(blocks: dict, parts: dict):
    """One block of each kind: its parameters and which component it is."""
    from rich.table import Table

    table = Table(title="one block of each kind", title_justify="left")
    table.add_column("block")
    table.add_column("count", justify="right")
    table.add_column("what it is")
    share = blocks["feed-forward block"] / blocks["encoder layer"]
    rows = [
        ("attention block", "attention block", parts["attention"]),
        ("  queries, output", "queries and output", "Q and output projections, d x d each"),
        ("  keys, values", "keys and values", "K and V projections, d -> d_k per K/V head"),
        ("feed-forward block", "feed-forward block", f"{parts['feed-forward']}, {share:.0%} of a layer"),
        ("norm", "norm", parts["norm"]),
        ("encoder layer", "encoder layer", "attention, feed-forward, 2 norms"),
        ("decoder layer", "decoder layer", "2 attention blocks, feed-forward, 3 norms"),
    ]
    for label, key, what in rows:
        table.add_row(label, f"{blocks[key]:,}", what)
    return table


def _alignment_table(alignment: dict):
    """Each decoder layer's and head's alignment score (from core); the best head in bold."""
    from rich.table import Table

    scores = alignment["scores"]
    table = Table()
    table.add_column("layer")
    for head in range(max((len(row) for row in scores), default=0)):
        table.add_column(f"H{head + 1}", justify="right")
    best = max((s for row in scores for s in row), default=None)
    for layer, row in enumerate(scores):
        table.add_row(f"L{layer + 1}", *(f"[bold]{s:.3f}[/]" if s == best else f"{s:.3f}" for s in row))
    from rich.console import Group

    heading = (
        "[bold]alignment score[/] per layer/head: cross-attention mass on the source position the "
        f"task expects ({alignment['expected']}); 1 is a perfect head, uniform attention scores ~1/length"
    )
    return Group(heading, table)


def _key_values(title: str, data: dict):
    from rich.table import Table

    table = Table.grid(padding=(0, 2))
    table.add_column(style="dim")
    table.add_column()
    for key, value in data.items():
        table.add_row(key, "" if value is None else shown_value(key, value))
    from rich.panel import Panel

    return Panel(table, title=title, title_align="left", expand=False)


@click.command("list", short_help="Bundled checkpoints and those in a folder.")
@click.argument("folder", required=False, type=click.Path(file_okay=False))
@json_option
def list_cmd(folder, as_json) -> None:
    """The bundled checkpoints, and the *.safetensors files in FOLDER.

    \b
    Examples:
      minitx list
      minitx list runs/ --json
    """
    from minitx import checkpoints
    listings = checkpoints.list_checkpoints(folder)
    if as_json:
        echo_json(
            [
                {
                    "name": x.name,
                    "path": str(x.path),
                    "task": x.task,
                    "size_bytes": x.size_bytes,
                    "accuracy": x.accuracy,
                    "steps": x.steps,
                    "bug": x.bug,
                    "error": x.error,
                }
                for x in listings
            ]
        )
        return
    from rich import box
    from rich.table import Table

    from minitx import checkpoints as bundled

    # No vertical rules, and one word per note: at 80 columns every name and note fits whole.
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("name", no_wrap=True)
    table.add_column("task", no_wrap=True)
    for column in ("size", "accuracy", "steps"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("note", overflow="fold")
    for x in listings:
        is_bundled = x.path.parent == bundled.BUNDLED_DIR and x.name == x.path.stem
        name = x.name if is_bundled else x.path.name  # the folder is already on the command line
        if x.error:
            table.add_row(name, "", "", "", "", f"[red]unreadable: {x.error}[/]")
            continue
        acc = f"{x.accuracy:.1%}" if x.accuracy is not None else "?"
        note = " ".join(n for n in ("bundled" if is_bundled else "", f"bug:{x.bug}" if x.bug else "") if n)
        steps = str(x.steps) if x.steps is not None else "?"
        table.add_row(name, x.task, f"{x.size_bytes / 1024:.0f} KB", acc, steps, note)
    if not listings:
        click.echo("no checkpoints found")
        return
    console().print(table)
