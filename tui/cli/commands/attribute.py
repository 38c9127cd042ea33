"""`minitx attribute`: which source tokens each output token of a greedy decode depends on
(integrated gradients, input x gradient, occlusion, or the attention itself), and how often the
cross-attention agrees with that (`--agreement`). The methods are core/interp/source_attribution.py's."""

from __future__ import annotations

from pathlib import Path

import click

from minitx.core.wording import counted
from minitx.tui.cli.common import (
    BadArgument,
    apply_threads,
    checkpoint_and_sources,
    console,
    core_choice,
    device_option,
    echo_json,
    language_options,
    not_computed_data,
    source_texts,
    threads_option,
)
from minitx.tui.cli.progress import Progress

EXAMPLE = 'minitx attribute reverse "3 1 4 1 5"'
AGREEMENT_SOURCES = 100  # --agreement's default --n: a few seconds with ig on a bundled model


@click.command("attribute", short_help="Which source tokens each output token depends on.")
@click.argument("args", nargs=-1, metavar="[CKPT] SOURCE...")
@click.option("--method", type=core_choice("interp.source_attribution", "METHODS"), default="ig",
              show_default=True,
              help="ig: integrated gradients from an all-<pad> source; ixg: input x gradient; occlusion: "
                   "the drop when a token is replaced; attention: the decode's own cross-attention.")
@click.option("--target", metavar="TOKEN", default=None,
              help="Contrast: attribute log p(output) - log p(TOKEN), why this rather than TOKEN.")
@click.option("--ig-steps", type=click.IntRange(min=1), default=32, show_default=True,
              help="ig: points of the path from the baseline (Gauss-Legendre).")
@click.option("--occlude-with", type=core_choice("interp.source_attribution", "FILLERS"), default="pad",
              show_default=True, help="occlusion: the token whose vector replaces a source token's.")
@click.option("--attention", "view", default="rollout", show_default=True, metavar="ROWS",
              help="attention: Ll.Hh (one cross-attention head), Ll (a layer's mean) or rollout.")
@click.option("--numbers", "-n", is_flag=True, help="Print each cell's share (a '-' marks a negative one).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the attributions as JSON: a results list, one per source.")
@click.option("--svg", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also draw the grids as an SVG picture.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also write the attributions as CSV: a row per source, step and source token.")
@click.option("--agreement", is_flag=True,
              help="How often each cross-attention head's argmax is the method's, and their rank "
                   "correlation, on --n fresh or held-out sources (or the sources given).")
@click.option("--n", "n", type=click.IntRange(min=1), default=AGREEMENT_SOURCES, show_default=True,
              help="--agreement: how many sources.")
@click.option("--seed", type=click.IntRange(min=0), default=1234, show_default=True,
              help="--agreement: which sources are drawn.")
@language_options
@device_option
@threads_option
def attribute_cmd(args, method, target, ig_steps, occlude_with, view, numbers, as_json, svg, csv_path,
                  agreement, n, seed, device, threads) -> None:
    """For each step of the greedy decode of SOURCE by CKPT (default: reverse), how much each
    source token contributes to the log-probability of the token output there (teacher-forced on
    the decode's own output). The inputs are the source's token vectors before positions are
    added, so it works on every model minitx opens.

    The grid's rows are the output tokens, its columns the source tokens; a cell's colour is its
    share of the row, |a| / sum |a| (attention's scale), and '-' marks an attribution against
    the token. --json and --csv give the attributions themselves; ig also each step's
    completeness gap (delta: the row's sum minus the change of the output from the baseline).

    \b
    Examples:
      minitx attribute reverse "3 1 4 1 5"
      minitx attribute reverse 31415 --method occlusion --numbers
      minitx attribute reverse 31415 --target 9   # why this token, not 9
      minitx attribute dates "1 December 2026" --json
      minitx attribute reverse 31415 --method attention --attention L2.H1
      printf '3 1 4\\n2 7 1 8\\n' | minitx attribute copy - --csv copy.csv
      minitx attribute reverse --agreement --method ig --n 100

    --agreement: for every layer and head, the share of steps where the head's cross-attention
    argmax is the attribution's argmax (its most positive entry), and the mean rank correlation
    of the two rows; the method against occlusion is the reference row, and where the task says
    where each output comes from, how often the method's argmax is there.
    """
    apply_threads(threads)
    for path, flag in ((svg, "--svg"), (csv_path, "--csv")):
        if path is not None:
            _check_writable(path, flag)  # before any work: a file that cannot be written is one line now
    if agreement and method == "attention":
        raise click.UsageError("--agreement compares attention with an attribution method: give "
                               "--method ig, ixg or occlusion")
    ckpt, args = checkpoint_and_sources(args, device)
    from minitx.core.interp import source_attribution as sa

    model, task = ckpt.model, ckpt.task
    try:
        contrast = None if target is None else sa.target_id(task.vocab, target)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--target") from None
    try:
        filler = sa.filler_id(task.src_vocab, occlude_with)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--occlude-with") from None
    if ig_steps > sa.MAX_IG_STEPS:
        raise click.BadParameter(f"at most {sa.MAX_IG_STEPS}", param_hint="--ig-steps")
    try:
        chosen_view = sa.parse_view(view, model)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--attention") from None
    if agreement:
        if target is not None:
            raise click.UsageError("--agreement attributes each output token itself: leave out --target")
        _agreement(ckpt, args, method, ig_steps, filler, n, seed, as_json)
        return
    ids = _parsed(ckpt, source_texts(args, EXAMPLE))
    from minitx.tui.render.attribution_tables import attribution_data

    results = []
    with Progress("attribute", enabled=not as_json, console=console()) as progress:
        def moved(done: float, total: int) -> None:  # whole steps (ig's points move it in fractions)
            progress.update(int(done), total)

        for number, src in enumerate(ids, 1):
            which = f"source {number}/{len(ids)}" if len(ids) > 1 else "the source"
            progress.stage(f"decoding {which}: steps")
            decode = sa.greedy(model, task, src, progress=moved)
            if not decode.tokens:
                raise BadArgument(f"{task.format_source(src)!r}: the decode output nothing to attribute")
            progress.stage(f"{method} of {which}: {sa.PROGRESS_UNITS.get(method, 'steps')}")
            result = sa.attribute(model, decode, method, target=contrast, ig_steps=ig_steps, filler=filler,
                                  view=chosen_view, progress=moved)
            results.append(attribution_data(result, task))
    if csv_path is not None:
        from minitx.tui.render.attribution_tables import attribution_csv

        _write(csv_path, attribution_csv(results), "--csv")
    if svg is not None:
        _write(svg, _svg(results, numbers, f"minitx attribute · {Path(str(ckpt.path)).name}"), "--svg")
    if as_json:
        echo_json({"checkpoint": str(ckpt.path), "task": task.name, "method": method,
                   **not_computed_data(ckpt), "results": results})
        return
    _print(results, numbers)


def _parsed(ckpt, texts: list[str]) -> list[list[int]]:
    from minitx.core.data.vocab import TaskInputError

    try:
        limit = ckpt.task.source_limit(ckpt.model_config.max_len)
        return [ckpt.task.parse(text, max_len=limit) for text in texts]
    except TaskInputError as e:
        raise click.BadParameter(str(e), param_hint="SOURCE") from None


def _print(results: list[dict], numbers: bool) -> None:
    from rich.text import Text

    from minitx.tui.render.attribution_tables import attribution_renderable
    from minitx.tui.render.grid import console_depth

    out = console()
    for i, data in enumerate(results):
        if i:
            out.print(Text(""))
        out.print(attribution_renderable(data, numbers, width=out.width, depth=console_depth(out)))


def _svg(results: list[dict], numbers: bool, title: str) -> str:
    import io

    from rich.console import Console
    from rich.text import Text

    from minitx.tui.render.attribution_tables import attribution_renderable

    recorder = Console(record=True, width=100, file=io.StringIO(), color_system="truecolor")
    for i, data in enumerate(results):
        if i:
            recorder.print(Text(""))
        recorder.print(attribution_renderable(data, numbers, width=100))
    return recorder.export_svg(title=title)


def _check_writable(path: str, flag: str) -> None:
    from minitx.core.checkpoint import CheckpointError, check_writable

    try:
        check_writable(Path(path))
    except CheckpointError as e:
        raise click.BadParameter(str(e), param_hint=flag) from None


def _write(path: str, text: str, flag: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise click.BadParameter(f"cannot write {path}: {e.strerror or e}", param_hint=flag) from None
    click.echo(f"wrote {path}", err=True)


def _agreement(ckpt, args, method, ig_steps, filler, n, seed, as_json) -> None:
    from minitx.core.interp import source_attribution as sa
    from minitx.tui.render.attribution_tables import agreement_table

    model, task = ckpt.model, ckpt.task
    if args:
        examples = [sa.Example(src) for src in _parsed(ckpt, source_texts(args, EXAMPLE))]
        drawn = f"{counted(len(examples), 'source')} given"
    else:
        try:
            examples = sa.task_examples(task, n, seed)
        except ValueError as e:  # an imported model that keeps no pairs
            raise click.UsageError(str(e)) from None
        drawn = f"{len(examples)} {task.evaluated_on} (seed {seed})"
    out = console()
    with Progress("attribute", enabled=not as_json, console=out) as progress:
        progress.stage(f"{method} and attention on each source", total=len(examples))
        table = sa.agreement(model, task, examples, method, ig_steps=ig_steps, filler=filler,
                             progress=lambda done, total: progress.update(done, total))
    if as_json:
        echo_json({"checkpoint": str(ckpt.path), "task": task.name, "seed": None if args else seed,
                   **not_computed_data(ckpt), **table.to_dict()})
        return
    out.print(f"[bold]{task.name}[/]: {method} against cross-attention on {drawn}, "
              f"{table.steps} steps of their greedy decodes")
    out.print(agreement_table(table.to_dict(), ckpt.model_config.n_heads))
