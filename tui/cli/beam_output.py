"""`minitx decode --beams K`: each source's beam search (core/interp/beam.py), its n-best printed
with greedy's output beside them, `--search-check`'s verdict (core/interp/search_check.py), and
with --json the greedy trace plus `nbest`, `greedy`, `tree` and `search_check` per source.

Only `decode --beams` loads this module, so its imports (core's, and torch with them) cost
nothing to the other commands."""

from __future__ import annotations

import click

from minitx.core.data.vocab import TaskInputError
from minitx.core.interp.beam import BeamSearch, score_outputs
from minitx.core.interp.decode import greedy_output
from minitx.core.interp.search_check import search_check
from minitx.tui.cli.common import BadArgument, echo_json, not_computed_data
from minitx.tui.cli.progress import Progress
from minitx.tui.cli.trace import blank_trace, trace_of
from minitx.tui.render.beam_tables import (
    first_difference,
    hypothesis_data,
    nbest_lines,
    search_check_data,
    search_check_lines,
    settings_line,
    tree_data,
)

BLANK_LINE = "(a blank line: nothing to decode)"  # its place among the sources' blocks


def decode_with_beams(ckpt, sources: list[str | None], settings: dict, top_k: int, interventions,
                      check: bool, as_json: bool) -> None:
    task = ckpt.task
    results = []
    with Progress("decode", enabled=not as_json) as progress:
        for number, text in enumerate(sources, 1):
            if text is None:  # a blank line of stdin keeps its place
                results.append({"json": blank_trace()})
                continue
            which = f"source {number} of {len(sources)}, " if len(sources) > 1 else ""
            progress.stage(f"{which}beam {settings['beams']}, step")
            try:
                ids = task.parse(text, max_len=task.source_limit(ckpt.model_config.max_len))
                trace = trace_of(ckpt, text, top_k, interventions) if as_json else None
            except TaskInputError as e:
                raise click.BadParameter(str(e), param_hint="SOURCE") from None
            results.append(_searched(ckpt, ids, settings, interventions, check, trace,
                                     lambda done, cap: progress.update(done, cap)))
    if as_json:
        echo_json({"checkpoint": str(ckpt.path), "task": task.name, **not_computed_data(ckpt),
                   "results": [r["json"] for r in results]})
        return
    for number, result in enumerate(results):
        if number:
            click.echo("")
        if "search" not in result:
            click.echo(BLANK_LINE)
            continue
        search = result["search"]
        click.echo(f"{task.shown_source(result['ids'])} · "
                   f"{settings_line(search.beams, search.length_penalty, search.early_stopping)}")
        for line in nbest_lines(result["nbest"], result["greedy"], task):
            click.echo(line)
        if result["check"] is not None:
            for line in search_check_lines(result["check"], task, task.source_labels(result["ids"])):
                click.echo(line)


def _searched(ckpt, ids: list[int], settings: dict, interventions, check: bool, trace: dict | None,
              progress=None) -> dict:
    """One source: the search (`progress(step, cap)` as it goes), its n-best, greedy's output
    scored the same way, the check."""
    model, task = ckpt.model, ckpt.task
    cap = task.decode_cap(len(ids), ckpt.model_config.max_len)
    options = dict(beams=settings["beams"], length_penalty=settings["length_penalty"],
                   early_stopping=settings["early_stopping"], cap=cap, interventions=interventions)
    try:
        search = BeamSearch(model, ids, **options).run(progress)
        with interventions.applied(model):
            greedy_tokens = greedy_output(model, ids, search.cap)
        nbest = search.hypotheses(settings["nbest"])
        greedy = next((h for h in search.hypotheses() if list(h.tokens) == greedy_tokens), None) or \
            score_outputs(model, ids, [greedy_tokens], length_penalty=search.length_penalty, cap=search.cap,
                          interventions=interventions)[0]
        expected = task.expected_output(ids)
        checked = search_check(model, ids, **options, label=task.format,
                               expected=None if expected is None else expected + [task.vocab.eos]) \
            if check else None
    except ValueError as e:  # an intervention the search cannot carry, a setting it refuses
        raise BadArgument(f"cannot search with a beam: {e}") from None
    data = dict(trace or {})
    data.update(
        source=task.format_source(ids),
        beam={"beams": search.beams, "length_penalty": search.length_penalty,
              "early_stopping": search.early_stopping, "nbest": settings["nbest"]},
        nbest=[hypothesis_data(h, task) for h in nbest],
        greedy={**hypothesis_data(greedy, task),
                "differs_at": first_difference(greedy.tokens, nbest[0].tokens)},
        tree=tree_data(search, task.vocab),
    )
    if checked is not None:
        data["search_check"] = search_check_data(checked, task)
    return {"ids": ids, "search": search, "nbest": nbest, "greedy": greedy, "check": checked, "json": data}

