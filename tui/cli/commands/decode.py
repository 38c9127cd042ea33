"""`minitx decode`: greedy predictions, top-k and cross-attention for one or more sources."""

from __future__ import annotations

import sys

import click
from click.core import ParameterSource

from minitx.tui.cli.common import (
    MEAN_SOURCES_HELP,
    BadArgument,
    ablate_options,
    apply_threads,
    checkpoint_found,
    device_option,
    echo_json,
    interventions_for,
    load_checkpoint_arg,
    pairs_option,
    threads_option,
)


def _named(args: tuple[str, ...]) -> tuple[str, ...]:
    """The arguments' callback: a first one that is no source, followed by sources, must name a
    checkpoint; one that does not is a one-line error before anything loads torch."""
    if len(args) > 1 and args[0] != "-" and not looks_like_source(args[0]):
        checkpoint_found(None, None, args[0])
    return args


def looks_like_source(text: str) -> bool:
    """Sources are digits (and spaces); a checkpoint name or path has other characters. Text
    with spaces that is not a file is a (possibly mistyped) source, so its error is about
    tokens, not about an unknown checkpoint."""
    from pathlib import Path

    stripped = text.strip()
    if not stripped:
        return True  # an empty source, whose error should say so
    try:
        if Path(stripped).exists():
            return False
    except OSError:  # e.g. a name too long for a file: certainly not a checkpoint
        return True
    return stripped.replace(" ", "").isdigit() or any(c.isspace() for c in stripped)


def trace_of(ckpt, source_text: str, top_k: int = 5, interventions=None, every_kind: bool = False) -> dict:
    """Decode one source with core's Stepper (under `interventions`, e.g. an ablation) and record
    everything as plain data: the prediction, each step's top-k, log-probability and entropy, and
    cross-attention as [layer][head][step][source]. every_kind: also decoder self-attention as
    [layer][head][step][decoder input] (zero after the step) with "decoder_inputs", and encoder
    self-attention as [layer][head][source][source]."""
    from minitx.core.interp.decode import Stepper

    task, vocab = ckpt.task, ckpt.task.vocab
    limit = ckpt.model_config.max_len - 2  # room for SOS and EOS in the positional table
    ids = task.parse(source_text, max_len=limit)
    stepper = Stepper(ckpt.model, ids, top_k=top_k, cap=task.decode_cap(len(ids), ckpt.model_config.max_len),
                      interventions=interventions, vocab=vocab)
    results = stepper.run()
    prediction = task.format(stepper.tokens)
    expected_ids = task.expected_output(ids)
    expected = None if expected_ids is None else task.format(expected_ids)
    layers, heads = results[0].cross_attention.shape[:2] if results else (0, 0)
    cross = [
        [[r.cross_attention[layer, head].tolist() for r in results] for head in range(heads)]
        for layer in range(layers)
    ]
    trace = {
        "source": task.format_source(ids),
        "source_tokens": task.source_labels(ids),  # one visible label per token fed (space as ␣)
        "prediction": prediction,
        "expected": expected,
        "correct": None if expected is None else (prediction == expected and bool(results)
                                                  and results[-1].is_end),
        "finished": bool(results) and results[-1].is_end,  # False: stopped at the length cap
        "within_training_lengths": task.min_len <= task.source_length(ids) <= task.max_len,
        # tokens the vocabulary reads (a target had them) that no training source held
        "unseen_in_training_sources": [vocab.label(i) for i in task.unseen_source_tokens(ids)],
        "ablated": [str(h) for h in stepper.interventions.ablated],
        "steps": [
            {
                "index": r.index,
                "token": r.token,
                "text": r.text,
                "top_k": [{"token": t, "text": vocab.label(t), "p": p} for t, p in r.top_k],
                "log_p": float(r.log_probs[r.token]),
                "entropy": r.entropy,
            }
            for r in results
        ],
        "cross_attention": cross,
    }
    if every_kind:
        trace["decoder_inputs"] = [vocab.label(ckpt.model_config.sos_id)] + [r.text for r in results[:-1]]
        trace["self_attention"] = [[stepper.self_attention_grid(layer, head).tolist()
                                    for head in range(heads)] for layer in range(layers)]
        trace["encoder_attention"] = [[stepper.encoder_attention_grid(layer, head).tolist()
                                       for head in range(stepper.encoder_attention.shape[1])]
                                      for layer in range(stepper.encoder_attention.shape[0])]
    return trace


def _sources(args: list[str]) -> list[str]:
    """Sources from the arguments; "-" (or none, when piped) reads one per line from stdin."""
    if not args or args == ["-"]:
        if not args and sys.stdin.isatty():
            raise click.UsageError('give a source, e.g. minitx decode reverse "3 1 4 1 5"')
        lines = [line for line in sys.stdin.read().splitlines() if line.strip()]
        if not lines:
            raise click.UsageError("no sources on stdin (one per line)")
        return lines
    return args


@click.command("decode", short_help="Predict outputs; show top-k and attention.")
@click.argument("args", nargs=-1, metavar="[CKPT] SOURCE...", callback=lambda ctx, param, args: _named(args))
@click.option(
    "--attention",
    "-a",
    is_flag=True,
    help="Draw every layer's and head's cross-attention as coloured cells.",
)
@click.option(
    "--numbers",
    "-n",
    is_flag=True,
    help="Print the weights in the cells (without colour the cells are shades).",
)
@click.option(
    "--top-k",
    type=click.IntRange(min=1, max=50),
    default=5,
    show_default=True,
    help="Most likely next tokens per step: listed under each output when given, and in --json.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print source, prediction, per-step top-k and cross-attention arrays as JSON.",
)
@ablate_options()
@pairs_option(MEAN_SOURCES_HELP)
@device_option
@threads_option
def decode_cmd(args, attention, numbers, top_k, as_json, ablate, ablate_kind, pairs, device, threads) -> None:
    """Predict the output for SOURCE with a checkpoint (default: the bundled reverse model).

    The output is printed as text: characters joined for a character-level model, words and
    digits separated by spaces. A source with a token the model never saw is refused, naming it.

    \b
    Examples:
      minitx decode reverse "3 1 4 1 5"               # prints 5 1 4 1 3
      minitx decode "3 1 4 1 5" --attention --numbers
      minitx decode sort 31415 27182 --json
      minitx decode reverse 31415 --top-k 3           # each step's 3 likeliest
      minitx decode dates "Tuesday, 1 December 2026"  # prints 2026-12-01
      printf '3 1 4 1\\n2 7 1 8\\n' | minitx decode copy  # a source per line
      minitx decode reverse 31415 --ablate cross:L2   # without L2 cross-attention

    A source is digits (with or without spaces) for the digit tasks, text for dates and for a
    model of your own pairs. Without colour (NO_COLOR, a 16-colour terminal, a pipe)
    --attention draws the weights as shades (░▒▓█); --numbers prints them.
    """
    args = list(args)
    name = None
    if args and args[0] != "-" and not looks_like_source(args[0]):
        name = args.pop(0)
    apply_threads(threads)
    ckpt = _load(name, device, alone=not args)
    interventions = interventions_for(ckpt, ablate, ablate_kind, pairs=pairs)
    from minitx.core.data.vocab import TaskInputError

    try:
        traces = [trace_of(ckpt, text, top_k, interventions) for text in _sources(args)]
    except TaskInputError as e:
        raise click.BadParameter(str(e), param_hint="SOURCE") from None
    if as_json:
        echo_json({"checkpoint": str(ckpt.path), "task": ckpt.task.name, "results": traces})
        return
    if attention:
        from minitx.tui.cli.common import console
        from minitx.tui.render.grid import console_depth, trace_renderable

        out = console()
        for trace in traces:  # without colours (NO_COLOR, a pipe, 16 colours) the cells are shades
            out.print(trace_renderable(trace, numbers, width=out.width, depth=console_depth(out)))
        return
    outside = [t["source"] for t in traces if not t["within_training_lengths"]]
    if outside:  # one note, not one per line of a long stdin
        which = f"{outside[0]!r} is" if len(outside) == 1 else f"{len(outside)} sources are"
        click.echo(
            f"note: {which} outside the lengths {ckpt.task.min_len}-{ckpt.task.max_len} "
            "the model was trained on",
            err=True,
        )
    unseen = [t for t in traces if t["unseen_in_training_sources"]]
    if unseen:
        tokens = list(dict.fromkeys(x for t in unseen for x in t["unseen_in_training_sources"]))
        which = f"{unseen[0]['source']!r} has" if len(unseen) == 1 else f"{len(unseen)} sources have"
        click.echo(f"note: {which} {', '.join(map(repr, tokens[:5]))}{' …' if len(tokens) > 5 else ''}, "
                   "seen in training only in targets: the encoder never met "
                   f"{'it' if len(tokens) == 1 else 'them'}", err=True)
    capped = [t["source"] for t in traces if not t["finished"]]
    if capped:
        which = f"{capped[0]!r}" if len(capped) == 1 else f"{len(capped)} sources"
        click.echo(f"note: {which} reached the length cap without an <eos>: the output was cut there",
                   err=True)
    listed = click.get_current_context().get_parameter_source("top_k") != ParameterSource.DEFAULT
    for trace in traces:
        click.echo(trace["prediction"])
        if listed:  # --top-k asked for: each step's likeliest tokens under the output
            for number, step in enumerate(trace["steps"], 1):
                likely = " · ".join(f"{t['text']} {t['p']:.2f}" for t in step["top_k"])
                click.echo(f"  step {number}: {likely}")


def _load(name: str | None, device: str, alone: bool):
    """The checkpoint; when its name is the only argument and names nothing, say that it is not
    a source either (`decode "3,1,4"` is more likely a mistyped source than a checkpoint)."""
    try:
        return load_checkpoint_arg(name, device)
    except BadArgument as e:
        if not (alone and name is not None and "/" not in name and not name.endswith(".safetensors")):
            raise
        if "did you mean" in str(e):  # close to a bundled name: a mistyped checkpoint, most likely
            raise
        from minitx.core.data.tasks import get_task
        from minitx.core.data.vocab import TaskInputError

        try:
            get_task("reverse").parse(name)
        except TaskInputError as why:
            raise click.BadParameter(f"{name!r} is neither a checkpoint (see minitx list) nor a "
                                     f"source: {why}", param_hint="[CKPT] SOURCE") from None
        raise
