"""`minitx decode`: greedy predictions, top-k and cross-attention for one or more sources."""

from __future__ import annotations

import click
from click.core import ParameterSource

from minitx.tui.cli.commands.align import chosen_head, head_options
from minitx.tui.cli.common import (
    MEAN_SOURCES_HELP,
    ablate_options,
    apply_threads,
    checkpoint_and_sources,
    checkpoint_found,
    core_choice,
    device_option,
    echo_json,
    interventions_for,
    language_options,
    looks_like_source,
    not_computed_data,
    pairs_option,
    source_texts,
    threads_option,
)

EXAMPLE = 'minitx decode reverse "3 1 4 1 5"'  # what to type when no source is given


def _named(args: tuple[str, ...]) -> tuple[str, ...]:
    """The arguments' callback: a first one that is no source, followed by sources, must name a
    checkpoint; one that does not is a one-line error before anything loads torch."""
    if len(args) > 1 and args[0] != "-" and not looks_like_source(args[0]):
        checkpoint_found(None, None, args[0])
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
@click.option("--beams", metavar="K|default", callback=lambda ctx, param, value: beams_value(value),
              help="Beam search with K beams (as transformers' generate(num_beams=K)): the n-best with "
                   "their scores, greedy's output beside them; default: the model's own setting.")
@click.option("--length-penalty", type=float, default=None,
              help="With --beams: a finished output scores log p / length^A (default: the model's, 1).")
@click.option("--nbest", type=click.IntRange(min=1), default=None,
              help="With --beams: how many outputs to list (default: all K).")
@click.option("--early-stopping", type=core_choice("data.generation", "EARLY_STOPPING_NAMES"), default=None,
              help="With --beams: stop once K outputs finished (true), when no running one can win "
                   "by the current length (false), or by the longest allowed (never).")
@click.option("--search-check", is_flag=True,
              help="With --beams: score the empty output, greedy, beam K and beam 64 and say whether "
                   "this is a search error or a model error; flag repetition.")
@click.option("--align", "align", is_flag=True,
              help="Word alignments of each output to its source (i-j: source word i, output word j, "
                   "from 0), after a tab; in --json, \"alignment\". docs/alignment.md.")
@head_options
@ablate_options()
@pairs_option(MEAN_SOURCES_HELP)
@language_options
@device_option
@threads_option
def decode_cmd(args, attention, numbers, top_k, as_json, beams, length_penalty, nbest, early_stopping,
               search_check, align, method, layer, head, ablate, ablate_kind, pairs, device, threads) -> None:
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
      minitx decode reverse 31415 --beams 4 --search-check  # n-best, greedy
      minitx decode reverse "3 1 4" --align             # 4 1 3<TAB>0-2 1-1 2-0

    A source is digits (with or without spaces) for the digit tasks, text for dates and for a
    model of your own pairs. Piped, each line is a source and each gets one output line, a blank
    line an empty one (in --json an entry with "blank": true), so outputs line up with inputs.
    Without colour (NO_COLOR, a 16-colour terminal, a pipe) --attention draws the weights as
    shades (░▒▓█); --numbers prints them.
    """
    apply_threads(threads)
    _alignment_options_alone(align, method, layer, head, beams, attention, ablate)
    beam_options = _beam_options_alone(beams, length_penalty, nbest, early_stopping, search_check, attention)
    ckpt, args = checkpoint_and_sources(args, device)
    interventions = interventions_for(ckpt, ablate, ablate_kind, pairs=pairs)
    own_beams = ckpt.model.generation.num_beams
    if beams == "default" and own_beams == 1:
        if beam_options:
            raise click.UsageError(f"{_name(ckpt)}'s generation settings decode greedily (num_beams 1): "
                                   f"give {beam_options[0]} with --beams K")
        click.echo(f"note: {_name(ckpt)}'s generation settings decode greedily (num_beams 1): "
                   "greedy decoding it is", err=True)
        beams = None
    elif beams == "default":
        beams = own_beams
    if beams is None and beam_options:
        raise click.UsageError(f"{beam_options[0]} needs --beams K")
    if beams is not None:
        settings = _beam_settings(beams, length_penalty, nbest, early_stopping, ckpt)
        from minitx.tui.cli.beam_output import decode_with_beams

        decode_with_beams(ckpt, source_texts(args, EXAMPLE, keep_blank=True), settings, top_k, interventions,
                          search_check, as_json)
        return
    texts = source_texts(args, EXAMPLE, keep_blank=True)  # a blank line is answered by one
    traces = _traced(ckpt, texts, top_k, interventions, as_json)
    if align:
        _aligned(ckpt, texts, traces, chosen_head(ckpt.model, layer, head), method)
    if as_json:
        echo_json({"checkpoint": str(ckpt.path), "task": ckpt.task.name, **not_computed_data(ckpt),
                   "results": traces})
        return
    if attention:
        from minitx.tui.cli.common import console
        from minitx.tui.render.grid import console_depth, trace_renderable

        out = console()
        for trace in traces:  # without colours (NO_COLOR, a pipe, 16 colours) the cells are shades
            if trace.get("blank"):
                out.print("")
                continue
            out.print(trace_renderable(trace, numbers, width=out.width, depth=console_depth(out)))
        return
    _notes(ckpt, [t for t in traces if not t.get("blank")], own_beams)
    listed = click.get_current_context().get_parameter_source("top_k") != ParameterSource.DEFAULT
    for trace in traces:
        aligned = trace.get("alignment")
        links = f"\t{aligned['links'] if aligned else ''}" if align and not trace.get("blank") else ""
        click.echo(trace["prediction"] + links)
        if listed:  # --top-k asked for: each step's likeliest tokens under the output
            for number, step in enumerate(trace.get("steps", ()), 1):
                likely = " · ".join(f"{t['text']} {t['p']:.2f}" for t in step["top_k"])
                ruled = "".join(f" ({r['rule']}: {r['instead_text']} otherwise)" for r in step["ruled"])
                click.echo(f"  step {number}: {likely}{ruled}")


def _alignment_options_alone(align: bool, method: str, layer, head, beams, attention: bool, ablate) -> None:
    """--method, --layer and --head say how --align aligns; --align goes with greedy text or JSON."""
    source = click.get_current_context().get_parameter_source
    given = [f"--{name}" for name in ("method", "layer", "head") if source(name) != ParameterSource.DEFAULT]
    if given and not align:
        raise click.UsageError(f"{given[0]} says how --align aligns: give --align")
    if align and beams is not None:
        raise click.UsageError("--align aligns greedy outputs: drop --beams")
    if align and attention:
        raise click.UsageError("--align prints links beside each output, --attention draws grids: give one")
    if align and ablate:
        raise click.UsageError("--align reads the whole model's attention: drop --ablate")
    if head is not None and layer is None:
        raise click.UsageError("--head needs --layer (the layer the head is in)")


def _aligned(ckpt, texts: list[str | None], traces: list[dict], head, method: str) -> None:
    """Each trace's "alignment": its source's words linked to its output's, teacher-forced on
    the output (None, with a note, where the source's pieces do not make its typed words)."""
    from minitx.core.interp.word_alignment import Unmappable, output_alignment

    task = ckpt.task
    for text, trace in zip(texts, traces):
        if text is None:
            continue
        ids = task.parse(text, max_len=task.source_limit(ckpt.model_config.max_len))
        try:
            trace["alignment"] = output_alignment(ckpt.model, task, ids, [s["token"] for s in trace["steps"]],
                                                  text, head, method).to_dict()
        except Unmappable as e:
            trace["alignment"] = None
            click.echo(f"note: {text[:40]!r} not aligned: {e}", err=True)


def _traced(ckpt, texts: list[str | None], top_k: int, interventions, as_json: bool) -> list[dict]:
    """Each text's trace (a blank one's says so), with progress per source and per step: a big
    model's long output takes a while (off with --json, as every command's progress)."""
    from minitx.core.data.vocab import TaskInputError
    from minitx.tui.cli.progress import Progress
    from minitx.tui.cli.trace import blank_trace, trace_of

    traces = []
    with Progress("decode", enabled=not as_json) as progress:
        for number, text in enumerate(texts, 1):
            if text is None:  # a blank line of stdin
                traces.append(blank_trace())
                continue
            which = f"source {number} of {len(texts)}, " if len(texts) > 1 else ""
            progress.stage(f"decoding {which}step")
            try:
                traces.append(trace_of(ckpt, text, top_k, interventions,
                                       progress=lambda done, cap: progress.update(done, cap)))
            except TaskInputError as e:
                raise click.BadParameter(str(e), param_hint="SOURCE") from None
    return traces


def _notes(ckpt, traces: list[dict], own_beams: int) -> None:
    """What a person should know about the outputs, once for all of them (on stderr)."""
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
    if own_beams > 1:  # its own generate() would search: say so in every greedy view
        from minitx.tui.render.beam_tables import greedy_note

        see = "--beams default shows that search"
        click.echo(f"note: {greedy_note(own_beams, see)}", err=True)
    capped = [t["source"] for t in traces if not t["finished"]]
    if capped:
        which = f"{capped[0]!r}" if len(capped) == 1 else f"{len(capped)} sources"
        click.echo(f"note: {which} reached the length cap without an <eos>: the output was cut there",
                   err=True)


def beams_value(value: str | None) -> int | str | None:
    """--beams: a positive integer, or "default" (the model's own num_beams)."""
    if value is None or value == "default":
        return value
    try:
        beams = int(value)
    except ValueError:
        beams = 0
    if beams < 1:
        raise click.BadParameter(f"{value!r} is not a number of beams: give a positive integer, or "
                                 "default (the model's own setting)", param_hint="--beams")
    return beams


def _beam_options_alone(beams, length_penalty, nbest, early_stopping, search_check, attention) -> list[str]:
    """The beam options given (each needs --beams); --attention draws greedy's grids, so it
    cannot go with --beams."""
    given = [flag for flag, value in (("--length-penalty", length_penalty), ("--nbest", nbest),
                                      ("--early-stopping", early_stopping),
                                      ("--search-check", search_check or None)) if value is not None]
    if beams is not None and attention:
        raise click.UsageError("--attention draws greedy decoding's grids: a beam hypothesis's grid is "
                               "in the app's beam view (B in Explore)")
    return given


def _beam_settings(beams: int, length_penalty, nbest, early_stopping, ckpt) -> dict:
    """The search's settings: the options given, the model's own generation settings for the rest."""
    own = ckpt.model.generation
    if nbest is not None and nbest > beams:
        raise click.BadParameter(f"{nbest} outputs asked of a beam of {beams}: --nbest is at most "
                                 "--beams", param_hint="--nbest")
    from minitx.core.data.generation import EARLY_STOPPING_NAMES
    from minitx.core.interp.beam import check_settings

    stop = EARLY_STOPPING_NAMES.get(early_stopping, own.early_stopping)
    penalty = own.length_penalty if length_penalty is None else length_penalty
    try:
        check_settings(beams, penalty, stop)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--length-penalty") from None
    return {"beams": beams, "length_penalty": penalty, "early_stopping": stop, "nbest": nbest or beams}


def _name(ckpt) -> str:
    """What a note calls the model: its file's name."""
    return ckpt.path.stem if ckpt.path is not None else "the model"
