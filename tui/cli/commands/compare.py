"""`minitx compare A B`: two checkpoints side by side (numbers from checkpoints.compare)."""

from __future__ import annotations

import click

from minitx.tui.cli.common import (
    ablate_options,
    ablated_name,
    apply_threads,
    checkpoint_found,
    console,
    device_option,
    echo_json,
    interventions_for,
    json_option,
    language_options,
    load_checkpoint_arg,
    pairs_option,
    sample_options,
    shown_value,
    threads_option,
)
from minitx.tui.cli.progress import Progress

WEIGHT_ROWS = 10  # tensors listed in the weight-distance table (JSON has them all)


@click.command("compare", short_help="Two checkpoints side by side: accuracy, heads, weights.")
@click.argument("a", metavar="A", callback=checkpoint_found)
@click.argument("b", metavar="B", callback=checkpoint_found)
@click.option("--source", "-s", default=None, help='Also decode this source with both, e.g. "3 1 4 1 5".')
@sample_options("Fresh random sequences both models decode.")
@ablate_options("a", "b")
@pairs_option("Compare on the source/target pairs of FILE (.tsv, .csv or .jsonl), read by each model in "
              "its own vocabulary, instead of A's examples: what a model that keeps none needs.")
@language_options
@device_option
@threads_option
@json_option
def compare_cmd(a, b, source, n, seed, ablate_a, ablate_b, ablate_kind, pairs, device, threads,
                as_json) -> None:
    """Compare checkpoints A and B (bundled names or paths) on the same fresh sequences
    (drawn from A's task lengths; each model is scored against its own task), or on A's
    held-out pairs for models of your own data. Both must read the same vocabulary.

    Shows config differences, parameter counts, exact match overall and per length, how often
    their outputs agree, each layer's and head's alignment score (mean cross-attention on the
    source position the task expects) and how far apart their weights are.

    Then, as for a base model (A) and its fine-tune (B): both models' loss per target token,
    and on text pairs corpus BLEU and chrF (sacrebleu), their outputs side by side, each layer's
    relative weight change |dW| / |W| (which layers moved) and each cross-attention head's change
    on the pairs (which heads moved). Models of different architectures get the first two; the
    others say in one line why they are skipped.

    \b
    Examples:
      minitx compare reverse reverse-no-shift
      minitx compare reverse my-run.safetensors --source "3 1 4 1 5"
      minitx compare reverse copy --n 200 --json
      minitx compare reverse reverse --ablate-b cross:L2.H1  # one head's part
      minitx compare base/ tuned.safetensors --pairs test.tsv  # a fine-tune
    """
    apply_threads(threads)
    from minitx.core.compare import compare_loaded, decode_both, sharing_pairs
    from minitx.core.fine_tune_diff import fine_tune_diff

    # a base folder beside its fine-tune: both measured on the pairs the fine-tune keeps
    ckpt_a, ckpt_b = sharing_pairs(load_checkpoint_arg(a, device, pairs),
                                   load_checkpoint_arg(b, device, pairs))
    # Each model's ablation applies to that model only (two loads are two models, even of one file).
    ablations = (interventions_for(ckpt_a, ablate_a, ablate_kind, "--ablate-a"),
                 interventions_for(ckpt_b, ablate_b, ablate_kind, "--ablate-b"))
    names = tuple(ablated_name(name, iv, ckpt.model_config.n_heads)
                  for name, iv, ckpt in zip((a, b), ablations, (ckpt_a, ckpt_b)))
    with ablations[0].applied(ckpt_a.model), ablations[1].applied(ckpt_b.model):
        decoded = None
        if source is not None:  # a bad source fails before the slower comparison
            decoded = decode_both(ckpt_a, ckpt_b, source)
            decoded["agree"] = decoded["a"] == decoded["b"]
        out = console()
        with Progress("compare", enabled=not as_json, console=out) as progress:
            progress.stage(f"decoding {ckpt_a.task.examples_words(ckpt_a.task.sample_size(n))} with both "
                           "models")
            result = compare_loaded(ckpt_a, ckpt_b, n=n, seed=seed, names=names)
            progress.stage("loss, BLEU and chrF of both, and which layers and heads moved")
            changes = fine_tune_diff(ckpt_a, ckpt_b, n=n, seed=seed)
    if as_json:
        data = result.to_dict()
        data["paths"] = {"a": str(ckpt_a.path), "b": str(ckpt_b.path)}
        data["decode"] = decoded
        data["changes"] = changes.to_dict()
        echo_json(data)
        return
    sections = [
        _summary(result),
        _config_table(result),
        _by_length(result),
        _alignment(result, ckpt_a.task.alignment_name, ckpt_b.task.alignment_name),
        _weights(result),
    ]
    from minitx.tui.render.fine_tune_tables import fine_tune_sections

    sections += fine_tune_sections(changes, names)  # base against fine-tuned
    if decoded is not None:
        sections.append(_decode_table(result, decoded))
    for heading, body in sections:
        out.print(heading)
        out.print(body)


def _table(*columns: str):
    from rich.table import Table

    table = Table()
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right")
    return table


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _summary(c):
    table = _table("", f"A: {c.a.name}", f"B: {c.b.name}")
    table.add_row("task", c.a.task, c.b.task)
    table.add_row("parameters", f"{c.a.params:,}", f"{c.b.params:,}")
    table.add_row(f"exact match ({c.examples})", _pct(c.a.accuracy), _pct(c.b.accuracy))
    best = [r.best_head for r in (c.a, c.b)]
    label = "best alignment head" if c.a.head_measure == "alignment" else "sharpest head"
    table.add_row(label, *(f"L{l + 1} H{h + 1} {s:.2f}" for l, h, s in best))
    from rich.console import Group

    if c.weight_distance is None:
        distance = f"no weight distance: the shapes differ (only {c.weights_compared} match)"
    else:
        distance = f"weight distance [bold]{c.weight_distance:.4f}[/] (||A-B|| / ||A||, all tensors)"
    footer = f"identical outputs on [bold]{c.agreement:.1%}[/] of the sequences · {distance}"
    return "[bold]summary[/]", Group(table, footer)


def _config_table(c):
    if not c.config_diff:
        return "[bold]config differences[/]", "none: model, task and training summary are identical"
    table = _table("field", "A", "B")
    for field, x, y in c.config_diff:
        table.add_row(field, shown_value(field, x), shown_value(field, y))
    return "[bold]config differences[/]", table


def _by_length(c):
    table = _table("length", "A", "B")
    for length in sorted(set(c.a.by_length) | set(c.b.by_length)):
        table.add_row(str(length), _pct(c.a.by_length.get(length)), _pct(c.b.by_length.get(length)))
    return "[bold]exact match by source length[/]", table


def _alignment(c, expected_a: str, expected_b: str):
    expected = expected_a if expected_a == expected_b else f"A {expected_a}, B {expected_b}"
    table = _table("head", "A", "B")
    heads = {
        (layer, head) for r in (c.a, c.b) for layer, row in enumerate(r.alignment) for head in range(len(row))
    }
    best = [r.best_head[:2] for r in (c.a, c.b)]
    for layer, head in sorted(heads):
        cells = []
        for side, report in enumerate((c.a, c.b)):
            try:
                score = report.alignment[layer][head]
            except IndexError:  # the other model has more layers or heads
                cells.append("-")
                continue
            text = f"{score:.3f} {_bar(score)}"
            cells.append(f"[bold]{text}[/]" if best[side] == (layer, head) else text)
        table.add_row(f"L{layer + 1} H{head + 1}", *cells)
    if c.a.head_measure == "sharpness":
        return ("[bold]sharpness per layer/head[/] (no expected pattern to score: each head's "
                "largest weight over the source, averaged; bold: sharpest)", table)
    return f"[bold]alignment score per layer/head[/] (expected {expected}; bold: best head)", table


def _bar(fraction: float, width: int = 10) -> str:
    full = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * full + "·" * (width - full)


def _weights(c):
    shown = sorted(c.weights, key=lambda w: w.relative, reverse=True)[:WEIGHT_ROWS]
    heading = f"[bold]weight distance[/]: the {len(shown)} most changed of {len(c.weights)} compared tensors"
    table = _table("parameter", "shape", "||A-B||", "relative ||A-B|| / ||A||")
    for w in shown:
        table.add_row(w.name, "x".join(map(str, w.shape)), f"{w.l2:.4g}", f"{w.relative:.4f}")
    if not c.unmatched:
        return heading, table
    from rich.console import Group

    some = ", ".join(c.unmatched[:3]) + (", …" if len(c.unmatched) > 3 else "")
    note = f"{len(c.unmatched)} tensors not compared (only in one model, or other shapes): {some}"
    return heading, Group(table, note)


def _decode_table(c, decoded: dict):
    from rich.markup import escape  # the texts are a person's data: "[" is not markup

    table = _table("model", "prediction", "expected", "correct")
    for side, report in (("a", c.a), ("b", c.b)):
        expected = decoded[f"expected_{side}"]
        ok = decoded[side] == expected
        mark = "-" if expected is None else "[green]yes[/]" if ok else "[red]no[/]"
        table.add_row(f"{side.upper()}: {escape(report.name)}", escape(decoded[side]),
                      escape(expected or "(not known)"), mark)
    agree = "the two predictions agree" if decoded["agree"] else "the two predictions differ"
    return f"[bold]source {escape(decoded['source'])}[/]: {agree}", table
