"""`minitx patch` (activation patching, with attribution patching beside it) and `minitx lens`
(the logit lens): where the answer is carried, and what each decoder layer would say."""

from __future__ import annotations

import click

from minitx.tui.cli.common import (
    MEAN_SOURCES_HELP,
    ablate_options,
    apply_threads,
    checkpoint_found,
    console,
    device_option,
    echo_json,
    interventions_for,
    json_option,
    language_options,
    load_checkpoint_arg,
    not_computed_data,
    pairs_option,
    threads_option,
)
from minitx.tui.cli.progress import Progress


def _parse(ckpt, text: str, flag: str) -> list[int]:
    from minitx.core.data.vocab import TaskInputError

    try:
        return ckpt.task.parse(text, max_len=ckpt.task.source_limit(ckpt.model_config.max_len))
    except TaskInputError as e:
        raise click.BadParameter(str(e), param_hint=flag) from None


@click.command("patch", short_help="Activation patching: which heads carry the answer.")
@click.argument("ckpt", required=False, callback=checkpoint_found)
@click.option("--clean", default=None, metavar="SOURCE",
              help="The source whose answer to recover, e.g. 31415. [default: a drawn pair]")
@click.option("--corrupt", default=None, metavar="SOURCE", help="Another source of the same length.")
@click.option("--seed", type=click.IntRange(min=0), default=1234, show_default=True,
              help="Which pair is drawn when no sources are given.")
@click.option("--method", type=click.Choice(["both", "exact", "attribution"]), default="both",
              show_default=True,
              help="Exact patching, the fast attribution estimate, or both side by side.")
@pairs_option()
@language_options
@device_option
@threads_option
@json_option
def patch_cmd(ckpt, clean, corrupt, seed, method, pairs, device, threads, as_json) -> None:
    """Copy one activation at a time from the clean run of CKPT (default: reverse) into the
    corrupted run and print how much of the clean answer it recovers: 0 is the corrupted run,
    1 the clean one.

    Both runs are teacher-forced on the clean source's answer, so they differ only in the
    source. The measure is the logit of the clean answer minus that of the corrupted answer,
    averaged over the steps where the two answers differ. Each head's output is patched at every
    position; what each cross-attention head reads (K/V, Q); each residual stream (leaving a
    layer) at one position at a time, and at all.

    Typed sources take the task's answers where it can tell them (the digit tasks), else the
    model's own outputs (a date, a data model's or a translation model's text): then patching
    explains what the model says for each, right or wrong, and the two outputs must have as many
    tokens. Without --clean and --corrupt a pair is drawn: two examples of the same length with
    known, different answers (fresh sequences, fresh dates, a data model's held-out pairs, or
    the pairs of a --pairs file).

    Attribution estimates every patch at once from one forward and one backward; both shows it
    beside exact patching with their agreement (docs/interventions.md says when to trust it).

    \b
    Examples:
      minitx patch reverse --clean "3 1 4 1 5" --corrupt "2 7 1 8 2"
      minitx patch reverse --clean 31415 --corrupt 27182 --json
      minitx patch dates --seed 7
      minitx patch ./opus-mt --clean "I have 4 cats." --corrupt "I have 7 cats."
      minitx patch reverse --method attribution
    """
    apply_threads(threads)
    from minitx.core.interp.attribution import agreements, attribute
    from minitx.core.interp.pairs import draw_pairs, typed_pair
    from minitx.core.interp.patching import Patcher, sweep

    checkpoint = load_checkpoint_arg(ckpt, device, pairs)
    model, task = checkpoint.model, checkpoint.task
    if (clean is None) != (corrupt is None):
        raise click.UsageError("give both --clean and --corrupt, or neither (a pair is drawn)")
    try:
        if clean is None:
            pair = draw_pairs(task, 1, seed, model.cfg.eos_id)[0]
        else:
            typed = _parse(checkpoint, clean, "--clean"), _parse(checkpoint, corrupt, "--corrupt")
            pair = typed_pair(task, *typed, model.cfg.eos_id, model)
        patcher = Patcher.of_pairs(model, [pair])
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    with Progress("patch", enabled=not as_json, console=console()) as progress:
        result = estimate = None
        if method != "attribution":
            progress.stage("patching one activation at a time")
            result = sweep(patcher, progress=lambda done, total: progress.update(done, total))
        if method != "exact":
            progress.stage("attribution: one forward and one backward")
            estimate = attribute(patcher)
    agreed = agreements(result, estimate) if result is not None and estimate is not None else None
    from minitx.tui.render.patch_tables import attribution_report, patching_data, patching_report

    if as_json:
        data = {"checkpoint": str(checkpoint.path), "task": task.name, "method": method,
                **not_computed_data(checkpoint)}
        if result is None:  # the pair, as a sweep would have said it
            data.update({k: v for k, v in patcher.runs().to_dict().items() if not isinstance(v, dict)})
        echo_json({**data, **patching_data(result, estimate, agreed)})
        return

    n_heads = checkpoint.model_config.n_heads
    if result is None:
        console().print(attribution_report(estimate, patcher.runs(), n_heads, task))
    else:
        console().print(patching_report(result, n_heads, task, estimate, agreed))


def _names_a_checkpoint(text: str) -> bool:
    from minitx import checkpoints
    from minitx.core.checkpoint import CheckpointError

    try:
        checkpoints.resolve(text)
    except (CheckpointError, OSError):
        return False
    return True


def _checkpoint_first(args: tuple[str, ...]) -> tuple[str, ...]:
    """CKPT SOURCE: a CKPT that names no checkpoint is a one-line error before torch loads."""
    if len(args) == 2:
        checkpoint_found(None, None, args[0])
    return args


@click.command("lens", short_help="The logit lens: what each decoder layer would predict.")
@click.argument("args", nargs=-1, required=True, metavar="[CKPT] SOURCE",
                callback=lambda ctx, param, args: _checkpoint_first(args))
@click.option("--top-k", type=click.IntRange(min=1, max=13), default=1, show_default=True,
              help="Tokens shown per layer and step.")
@ablate_options()
@pairs_option(MEAN_SOURCES_HELP)
@language_options
@device_option
@threads_option
@json_option
def lens_cmd(args, top_k, ablate, ablate_kind, pairs, device, threads, as_json) -> None:
    """Decode SOURCE greedily with CKPT (default: reverse) and show, for every step, the token
    each decoder layer would predict if the decoder ended there (the output layer applied to
    that layer's residual stream, after the final norm for pre-norm). The last layer's row is
    the model's own prediction.

    \b
    Examples:
      minitx lens reverse "3 1 4 1 5"
      minitx lens "3 1 4 1 5" --top-k 3 --json
    """
    if len(args) > 2:
        raise click.UsageError("give one checkpoint and one source, e.g. minitx lens reverse \"3 1 4 1 5\"")
    name, text = (None, args[0]) if len(args) == 1 else args
    apply_threads(threads)
    if name is None and _names_a_checkpoint(text):  # `minitx lens dates`: the model, no source
        raise click.UsageError(f"{text!r} is a checkpoint: give a source to decode after it, e.g. "
                               f"minitx lens {text} SOURCE")
    checkpoint = load_checkpoint_arg(name, device)
    ids = _parse(checkpoint, text, "SOURCE")
    from minitx.core.interp.lens import logit_lens

    task, vocab = checkpoint.task, checkpoint.task.vocab

    interventions = interventions_for(checkpoint, ablate, ablate_kind, pairs=pairs)
    lens = logit_lens(checkpoint.model, ids, interventions=interventions)
    tops = lens.top(top_k)  # [layer][step] -> [(token, p)]
    if as_json:
        echo_json({"checkpoint": str(checkpoint.path), "source": task.format_source(ids),
                   "decoder_input": vocab.labels(lens.decoder_input),
                   "layers": [[[{"token": vocab.label(t), "p": p} for t, p in step] for step in layer]
                              for layer in tops]})
        return
    from rich.table import Table

    shown = vocab.label

    table = Table(box=None, padding=(0, 1), header_style="bold")
    table.add_column("step", justify="right")
    table.add_column("fed", justify="right")
    for layer in range(len(tops)):
        table.add_column(f"L{layer + 1}" + (" (model)" if layer == len(tops) - 1 else ""))
    for step, fed in enumerate(lens.decoder_input):
        cells = ["  ".join(f"{shown(t)} {p:.2f}" for t, p in layer[step]) for layer in tops]
        table.add_row(str(step + 1), shown(fed), *cells)
    out = console()
    out.print(f"source {task.format_source(ids)}: each decoder layer's top {top_k} at every step")
    table.caption, table.caption_justify = "fed: the decoder's input at that step", "left"
    out.print(table)
