"""`minitx eval`: exact-match accuracy per source length, the loss per target token, corpus BLEU
and chrF of text pairs, and the first wrong outputs."""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass

import click

from minitx.tui.cli.commands.decode import beams_value
from minitx.tui.cli.common import (
    ablate_options,
    ablated_name,
    apply_threads,
    checkpoint_found,
    device_option,
    echo_json,
    interventions_for,
    json_option,
    language_options,
    lengths_option_value,
    load_checkpoint_arg,
    pair_columns,
    sample_options,
    threads_option,
)
from minitx.tui.cli.progress import Progress

EVAL_BATCH = 500  # examples decoded at once


@click.command("eval", short_help="Exact match, loss, BLEU, chrF on fresh, held-out or file pairs.")
@click.argument("ckpt", required=False, callback=checkpoint_found)
@sample_options("Examples to decode (fresh sequences, or the first N held-out pairs).")
@click.option(
    "--lengths",
    metavar="MIN-MAX",
    default=None,
    help="Source lengths of the digit tasks, e.g. 4-10 or 12-16. [default: the lengths it was "
         "trained on]",
)
@click.option("--pairs", "--data", "pairs", type=click.Path(), metavar="FILE",
              help="Evaluate on every pair of this file (.tsv, .csv, .jsonl) instead.")
@click.option("--beams", metavar="K|default", callback=lambda ctx, param, value: beams_value(value),
              help="Outputs by beam search with K beams (generate(num_beams=K)), as the course scores "
                   "BLEU; default: the model's own setting. [default: greedy]")
@click.option("--max-new-tokens", type=click.IntRange(min=1), metavar="N",
              help="Generate at most N tokens an output, over the model's own limit (a folder "
                   "without max_length stops at 20). [default: the model's]")
@click.option("--failures", "show_failures", type=click.IntRange(min=0), default=0, metavar="N",
              help="Also list up to N wrong outputs, each with the step where it first goes wrong.")
@ablate_options()
@language_options
@device_option
@threads_option
@json_option
def eval_cmd(ckpt, n, seed, lengths, pairs, beams, max_new_tokens, show_failures, ablate, ablate_kind,
             device, threads, as_json) -> None:
    """Exact-match accuracy of CKPT (default: reverse), per source length. A digit task's model
    is measured on fresh random sequences, `dates` on fresh dates, a model of your own pairs on
    its held-out pairs (kept in the checkpoint), or any model on the pairs of a --pairs file
    (--data is the same; tokens it never saw read as <unk> and are counted).

    Beside exact match: the loss (cross-entropy per target token, end token included, padding
    not, over all the pairs at once: transformers' `labels` loss) and, on text pairs (held-out
    or a file's), corpus BLEU and chrF of the greedy outputs by sacrebleu, with its signatures.

    \b
    Examples:
      minitx eval reverse --n 1000
      minitx eval my-run.safetensors --lengths 11-20 --json  # does it generalise?
      minitx eval reverse --ablate cross:L2 --failures 5  # no L2 cross-attention
      minitx eval mine.safetensors --pairs test.tsv --failures 10
      minitx eval opus-mt-en-fr/ --pairs test.tsv --beams 4 --max-new-tokens 128
    """
    apply_threads(threads)
    from minitx.core.training.evaluation import score

    checkpoint = load_checkpoint_arg(ckpt, device)
    task = checkpoint.task
    positions = checkpoint.model_config.max_len
    decoding = _decoding(checkpoint, beams, max_new_tokens)
    interventions = interventions_for(checkpoint, ablate, ablate_kind, pairs=pairs)
    extra: dict = {}
    with interventions.applied(checkpoint.model):
        if pairs is not None:
            if lengths is not None:
                raise click.UsageError("--lengths and --pairs: a file's pairs have their own lengths")
            from minitx.core.data.pair_task import read_for_model

            given = read_for_model(pairs, task, positions, pair_columns())
            with Progress("eval", enabled=not as_json) as progress:
                batches = progress.track_examples(given.batches(task, EVAL_BATCH),
                                                  f"decoding {len(given.pairs):,} pairs", len(given.pairs))
                result = score(checkpoint.model, task, batches, show_failures, given.lines(), loss=True,
                               text=True, generate=decoding.generate)
            what = f"{given.provenance.file}: {result.n:,} pairs"
            if given.skipped:
                what += f" ({given.skipped:,} skipped: longer than the model's positions allow)"
            extra = {"data": given.provenance.to_dict(), "skipped_too_long": given.skipped}
        else:
            if lengths is not None and not task.exact_lengths:
                raise click.BadParameter(f"the {task.name} task's sources have their own lengths",
                                         param_hint="--lengths")
            lo, hi = lengths_option_value(lengths, (task.min_len, task.max_len))
            if task.exact_lengths and hi > positions - 2:  # pairs have their own lengths
                raise click.BadParameter(
                    f"this model takes sources of at most {positions - 2} tokens, not {hi}",
                    param_hint="--lengths")
            bounds = (lo, hi) if task.exact_lengths else (None, None)
            lines = task.heldout_lines()
            batches = task.evaluation_batches(n, seed, EVAL_BATCH, *bounds)
            with Progress("eval", enabled=not as_json) as progress:
                count = task.evaluation_count(n)
                batches = progress.track_examples(batches, f"decoding {task.examples_words(count)}", count)
                result = score(checkpoint.model, task, batches, show_failures, lines, loss=True,
                               text=task.heldout is not None, generate=decoding.generate)
            if task.heldout is not None:
                what = (f"{result.n:,} held-out pairs of {task.heldout_file()} (kept in the "
                        "checkpoint)")
            elif task.exact_lengths:
                what = f"{task.evaluated_on} of length {lo}-{hi}, seed {seed}"
                extra = {"seed": seed, "lengths": [lo, hi]}
            else:
                what = f"{result.n:,} {task.evaluated_on}, seed {seed}"
                extra = {"seed": seed}
    omitted = None if result.text else f"it is measured on {task.evaluated_on}, not text pairs"
    if as_json:
        echo_json(
            {
                "checkpoint": str(checkpoint.path),
                "task": task.name,
                "evaluated_on": what,
                "n": result.n,
                **extra,
                "accuracy": result.accuracy,
                "loss": result.loss,
                "target_tokens": result.target_tokens,
                "decoding": {"beams": decoding.beams, "max_new_tokens": decoding.max_new_tokens},
                **(result.text.to_dict() if result.text else
                   {"bleu": None, "chrf": None, "bleu_signature": None, "chrf_signature": None,
                    "bleu_omitted": omitted}),
                "by_length": {str(k): v for k, v in sorted(result.by_length.items())},
                "count_by_length": {str(k): v for k, v in sorted(result.count_by_length.items())},
                "unknown_tokens": result.unknown,
                "ablated": [str(h) for h in interventions.ablated],
                "ablate_kind": ablate_kind if interventions.ablated else None,
                **({"failures": [_failure_data(f, task) for f in result.failures]} if show_failures else {}),
            }
        )
        return
    if interventions.ablated:
        click.echo(ablated_name(task.name, interventions, checkpoint.model_config.n_heads))
    correct = result.n - result.wrong
    head = f"{task.name}: exact match {result.accuracy:.1%} ({correct}/{result.n})"
    width = shutil.get_terminal_size().columns  # COLUMNS, else the terminal's, else 80
    click.echo(f"{head} on {what}" if len(head) + len(what) + 4 <= width else f"{head}\n  on {what}")
    if result.unknown:
        click.echo(f"  {result.unknown:,} tokens unknown to the model were read as <unk>")
    _print_scores(result, omitted, decoding.words)
    rows = _length_rows(result)
    width = max([3] + [len(label) for label, *_ in rows])
    for label, acc, low, high in rows:
        note = "" if task.min_len <= low and high <= task.max_len else "  (not trained on)"
        click.echo(f"  length {label:>{width}}  {acc:7.1%}  {_bar(acc)}{note}")
    if show_failures:
        _print_failures(result.failures, result.wrong, task)


def _print_scores(result, omitted: str | None, outputs: str) -> None:
    """The loss per target token, and BLEU and chrF with their signatures (or why not)."""
    if result.loss is not None:
        click.echo(f"  loss {result.loss:.4g} per target token ({result.target_tokens:,} tokens, end "
                   "tokens included)")
    if result.text is None:
        click.echo(f"  no BLEU or chrF: {omitted}")
        return
    text = result.text
    click.echo(f"  BLEU {text.bleu:.2f}  chrF {text.chrf:.2f}  (sacrebleu, {outputs}, corpus level)")
    click.echo(f"    BLEU signature {text.bleu_signature}")
    click.echo(f"    chrF signature {text.chrf_signature}")


@dataclass(frozen=True)
class Decoding:
    """How eval's outputs are made: greedy (beams 1) or beam search, at most max_new_tokens each."""

    beams: int
    max_new_tokens: int | None  # None: the model's own limit
    generate: object  # score()'s `generate` (None: greedy decoding)

    @property
    def words(self) -> str:
        """'greedy outputs', 'beam 4 outputs, at most 128 new tokens'."""
        what = "greedy outputs" if self.beams == 1 else f"beam {self.beams} outputs"
        return what + (f", at most {self.max_new_tokens} new tokens" if self.max_new_tokens else "")


def _decoding(checkpoint, beams, max_new_tokens) -> Decoding:
    """--beams and --max-new-tokens: the model's generation settings with the length asked (a
    usage error past the positions it holds), and beam search's best output where K > 1."""
    model = checkpoint.model
    if max_new_tokens is not None:
        most = checkpoint.model_config.max_len - 1  # the start token takes one position
        if max_new_tokens > most:
            raise click.BadParameter(f"this model holds at most {most} new tokens after its start token, "
                                     f"not {max_new_tokens}", param_hint="--max-new-tokens")
        model.generation = dataclasses.replace(model.generation, max_new_tokens=max_new_tokens)
    k = model.generation.num_beams if beams == "default" else beams or 1
    if k == 1:
        return Decoding(1, max_new_tokens, None)
    from minitx.core.interp.beam import beam_outputs, check_settings

    try:
        check_settings(k, model.generation.length_penalty, model.generation.early_stopping)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--beams") from None
    pad = checkpoint.task.src_vocab.pad
    return Decoding(k, max_new_tokens, lambda src, cap: beam_outputs(model, src, pad, k, cap))


MAX_LENGTH_ROWS = 16  # more distinct lengths than this are grouped into ranges


def _length_rows(result) -> list[tuple[str, float, int, int]]:
    """(label, accuracy, shortest, longest) per length, or per range of lengths when there are
    many (a data file's sources vary a lot)."""
    lengths = sorted(result.by_length)
    if len(lengths) <= MAX_LENGTH_ROWS:
        return [(str(L), result.by_length[L], L, L) for L in lengths]
    span = -(-(lengths[-1] - lengths[0] + 1) // MAX_LENGTH_ROWS)  # ceil: at most 16 ranges
    rows = []
    for low in range(lengths[0], lengths[-1] + 1, span):
        group = [L for L in lengths if low <= L < low + span]
        if group:
            count = sum(result.count_by_length[L] for L in group)
            right = sum(result.by_length[L] * result.count_by_length[L] for L in group)
            rows.append((f"{group[0]}-{group[-1]}", right / count, group[0], group[-1]))
    return rows


def _failure_data(failure, task) -> dict:
    """A failure's ids, step and line, and the same as text."""
    return {**failure.to_dict(), "source_text": task.format_source(failure.source),
            "expected_text": task.format(failure.expected), "output_text": task.format(failure.output)}


def _print_failures(failures, wrong: int, task) -> None:
    """Each failure on three lines: source and step (and the file's line), then what came out
    against what should have, the first wrong token marked."""
    if not failures:
        click.echo("no wrong outputs")
        return
    click.echo(f"first {len(failures)} of {wrong} wrong outputs ([ ] marks the first wrong token):")
    for f in failures:
        where = f"line {f.line}: " if f.line is not None else ""
        click.echo(f"  {where}{task.format_source(f.source)}  wrong from step {f.first_wrong + 1}")
        click.echo(f"    got      {_marked(f.output, f.first_wrong, task.vocab)}")
        click.echo(f"    expected {_marked(f.expected, f.first_wrong, task.vocab)}")


def _marked(ids: list[int], step: int, vocab) -> str:
    """'5 1 [6] 1 3' (characters: 'Lov[i]ly, Rada'): the tokens up to EOS (shown only where it
    is the marked one), the token at `step` in brackets; a sequence that ended before `step`
    gets '[ ]'."""
    words = [vocab.tokens[i] if i not in vocab.specials else vocab.label(i) for i in ids]
    if len(words) <= step:
        words += ["[ ]"]
    else:
        words[step] = f"[{words[step]}]"
    if ids and ids[-1] == vocab.eos and len(ids) - 1 != step:
        words.pop()
    return ("" if vocab.level == "char" else " ").join(words)


def _bar(fraction: float, width: int = 20) -> str:
    full = round(fraction * width)
    return "█" * full + "·" * (width - full)
