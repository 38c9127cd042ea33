"""`minitx doctor [CKPT]`: the checks of docs/checks.md, with the likely cause of each failure.

All measuring and judging is core/doctor's; this file picks the model, shows progress and prints.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys

import click

from minitx.tui.cli import model_options
from minitx.tui.cli.common import (
    PAIRS_HINT,
    apply_threads,
    checkpoint_found,
    console,
    device_option,
    echo_json,
    pairs_option,
    task_on_pairs,
    threads_option,
)
from minitx.tui.cli.progress import Progress
from minitx.tui.render.colors import STATUS_MARKUP

EXIT_FAILED = 1  # a check failed
EXIT_CANNOT_RUN = 2  # bad checkpoint or options (the same code as a usage error)
MARKS = {"pass": "✓", "fail": "✗", "skip": "-"}  # each check done so far, on the progress line


class CannotRun(click.ClickException):
    exit_code = EXIT_CANNOT_RUN


@click.command("doctor", short_help="Check a model for the classic bugs and name the likely cause.")
@click.argument("ckpt", required=False, callback=checkpoint_found)
@click.option("--quick", is_flag=True, help="Skip the slow overfit-one-batch check; fewer sequences.")
@device_option
@threads_option
@click.option("--explain", is_flag=True, help="Also say what each check asserts.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON (same exit codes).")
@pairs_option("Check CKPT on the source/target pairs of FILE (.tsv, .csv or .jsonl, as for train --data) "
              "wherever a check needs examples: what a model that keeps none needs.")
@model_options.recipe_option
@model_options.apply(model_options.TASK_OPTIONS + model_options.MODEL_OPTIONS)
def doctor_cmd(ckpt, quick, device, threads, explain, as_json, pairs, **fresh) -> None:
    """Check CKPT (or, without CKPT, a fresh model built from the options) for classic bugs.

    Each check prints its measured number, its threshold and pass/fail; a failure also names
    the likely cause (docs/checks.md lists every check and cause). Two kinds of evidence are
    reported apart: code checks (does minitx's forward pass with this config have the bug?)
    and weight checks (were these weights trained under one? the trained weights run under
    each classic bug's variant of the forward pass, their symptoms, and the run's history when
    the file has one). The doctor decides from measurements only: it never reads a bug preset
    from the file's metadata or name. A model below its task's bar always gets a verdict.

    Without CKPT, --recipe and the model options (--d-model, --heads, --layers, --norm,
    --bug, ...; the same as `minitx train`'s) describe the fresh model; with CKPT they are
    refused. A fresh model gets the code checks only: it has no trained weights. The history
    checks read the run's history from the file; without one (a model from other code) they
    say they were skipped.

    \b
    Exit codes:
      0  every check that ran passed
      1  at least one check failed (a cause named, or the model fails its task)
      2  the checks could not run (bad checkpoint or options)

    \b
    Examples:
      minitx doctor reverse                   # a healthy model: exit code 0
      minitx doctor reverse --explain         # ... and what each check asserts
      minitx doctor reverse-no-shift --quick  # exit 1: target not shifted right
      minitx doctor my-run.safetensors --json
      minitx doctor --d-model 32 --heads 2    # a fresh model of that shape
      minitx doctor --bug no-scale --quick    # a missing 1/sqrt(d_k), diagnosed
      minitx doctor my-run.safetensors --quick || echo "something is wrong"

    A model of your own pairs (or a fresh one for --data FILE) is checked on its held-out
    pairs wherever a check needs examples, an imported one on the pairs it keeps, and any model
    on the pairs of a --pairs file. A model without examples gets every check that needs none;
    the others say why they were skipped. The alignment check applies when the model's task
    names an expected pattern (its own, train's --expect, or the doctor's --expect for CKPT),
    otherwise it reports each head's sharpness and is skipped.

    The overfit-one-batch check trains a fresh copy for 400 steps (several seconds on a CPU);
    --quick skips it.
    """
    apply_threads(threads)
    given = [name for name, value in fresh.items() if value is not None]  # **fresh: the model's options
    if ckpt is not None and set(given) - {"expect"}:
        flags = ", ".join("--" + name.replace("_", "-") for name in given if name != "expect")
        raise click.UsageError(f"{flags}: model options only apply without CKPT (a fresh model)")
    if ckpt is None and pairs is not None:
        raise click.UsageError("--pairs checks a checkpoint (CKPT); a fresh model is checked on --data FILE")
    with _exit_2_on_error():
        model, task, subject, record = _subject(ckpt, device, fresh, pairs)

    from minitx.core.doctor.diagnosis import diagnose_model, run_doctor
    from minitx.core.doctor.precision import precision_summary

    report = None if as_json else _Report(subject, explain)
    marks: list[str] = []
    # Piped, each row as it comes is the progress: no plain lines repeating it.
    with Progress("doctor", enabled=not as_json, console=report.out if report else None,
                  plain=False) as progress:
        progress.stage("running the first check")

        def on_result(result) -> None:
            marks.append(MARKS[result.status])
            progress.update(len(marks), description=f"checks done {''.join(marks)} (last {result.name})")
            if report is not None:
                report.row(result)

        with _exit_2_on_error():  # a model whose forward pass crashes: exit 1 means "a check failed"
            results = run_doctor(model, task, quick=quick, trained=ckpt is not None, record=record,
                                 callback=on_result)
            diagnosis = diagnose_model(results, model, task, record)
    failed = any(r.passed is False for r in results) or bool(diagnosis.causes) or bool(diagnosis.fails_task)
    if report is not None:
        report.summary(results, diagnosis, pairs_wanted=not task.has_examples)
    else:
        echo_json(
            {
                **subject,
                "quick": quick,
                "passed": not failed,
                "checks": [_jsonable(r.to_dict()) for r in results],
                **diagnosis.to_dict(),
                "precision": precision_summary(results),
            }
        )
    sys.exit(EXIT_FAILED if failed else 0)


@contextlib.contextmanager
def _exit_2_on_error():
    """Any error (a bad file or option, a model that cannot run) is one line with exit code 2."""
    try:
        yield
    except click.ClickException:
        raise
    except Exception as e:
        if os.environ.get("MINITX_DEBUG"):
            raise
        from minitx.core.checkpoint import CheckpointError

        expected = isinstance(e, (ValueError, OSError, CheckpointError))  # messages meant for people
        message = str(e) if expected else f"{type(e).__name__}: {e}"
        raise CannotRun(message) from None


def _subject(ckpt, device: str, fresh: dict, pairs: str | None = None):
    """(model, task, description, run record) of the checkpoint (measured on the --pairs file's
    pairs when given, its --expect pattern where it names none), or of a fresh model from the
    options (its record is empty: nothing was trained)."""
    from minitx.core.doctor.history_checks import RunRecord
    from minitx.core.training.trainer import resolve_device

    if ckpt is not None:
        from minitx.tui.cli.common import load_checkpoint_arg

        checkpoint = load_checkpoint_arg(ckpt, device)
        if pairs is not None:
            checkpoint.task = task_on_pairs(checkpoint.task, pairs, checkpoint.model_config.max_len)
        if fresh.get("expect"):
            _expect(checkpoint.task, fresh["expect"])
        return (
            checkpoint.model,
            checkpoint.task,
            {
                "checkpoint": str(checkpoint.path),
                "task": checkpoint.task.name,
                "examples": (checkpoint.task.evaluated_on if checkpoint.task.has_examples
                             else "inputs made of its vocabularies (it keeps no example pairs)"),
                "model_config": checkpoint.model_config.to_dict(),
            },
            RunRecord.of(checkpoint.history, checkpoint.summary),
        )
    from minitx.core.doctor.diagnosis import fresh_model

    base = model_options.recipe_configs(fresh["recipe"])
    model_cfg, train_cfg = model_options.configs(*base, fresh)  # as `train` reads them
    model, task = fresh_model(model_cfg, train_cfg)
    return (
        model.to(resolve_device(device)),
        task,
        {
            "checkpoint": None,
            "task": task.name,
            "examples": task.evaluated_on,
            "model_config": model.cfg.to_dict(),
        },
        RunRecord(),
    )


def _expect(task, pattern: str) -> None:
    """--expect for a checkpoint: the pattern its task's cross-attention should show, for a task
    that names none (a data file trained without --expect, an imported model)."""
    from minitx.core.data.pair_task import PairsTask

    if task.alignment_name or not isinstance(task, PairsTask):
        raise click.BadParameter(f"the {task.name} task has its own expected pattern"
                                 f"{f' ({task.alignment_name})' if task.alignment_name else ''}",
                                 param_hint="--expect")
    task.expect = task.alignment_name = pattern


def _jsonable(data: dict) -> dict:
    """NaN or infinite measurements (a diverged model) become null: JSON has no NaN."""
    value = data.get("value")
    if isinstance(value, float) and not math.isfinite(value):
        data = {**data, "value": None, "detail": f"measured {value}; {data.get('detail', '')}".strip("; ")}
    return data


NAME_WIDTH = 26  # the longest check name, future-leakage-gradients, and a gap
KIND_HEADINGS = {
    "code": "code checks: does minitx's forward pass with this config have a bug?",
    "weights": "weight checks: were these weights trained under a bug?",
}
THRESHOLD_WIDTH = 12  # "< 1e-05, and > 1e-03 with positions" in three lines, the rest in one


class _Report:
    """One line per check as it finishes (what a failure points at under it), code checks and
    weight checks under their own headings, then the verdict and the causes with their evidence."""

    def __init__(self, subject: dict, explain: bool) -> None:
        self.out = console()
        self.explain = explain
        cfg = subject["model_config"]
        what = subject["checkpoint"] or "a fresh (untrained) model"
        from rich.text import Text

        from minitx.tui.cli.common import field_lines

        fields = [
            Text.assemble(("doctor", "bold"), f" {what}"),
            f"task {subject['task']}",
            f"checks on {subject['examples']}",
            f"{cfg['norm']}-norm d_model {cfg['d_model']} heads {cfg['n_heads']} layers "
            f"{cfg['n_encoder_layers']}+{cfg['n_decoder_layers']}",
        ]
        self.out.print(field_lines(fields, self.out.width), highlight=False)
        header = (f"{'result':<7}{'check':<{NAME_WIDTH}}{'measured':>9} "
                  f"{'threshold':<{THRESHOLD_WIDTH + 1}}note")
        self.out.print(f"[bold]{header}[/]")
        self.kind = ""

    def row(self, r) -> None:
        from rich.markup import escape
        from rich.padding import Padding
        from rich.table import Table

        from minitx.core.doctor.diagnosis import format_number

        if r.kind != self.kind:  # the two kinds of evidence, each under its own heading
            self.kind = r.kind
            self.out.print(f"[bold]{KIND_HEADINGS[r.kind]}[/]", highlight=False)

        line = Table.grid(padding=(0, 1))
        for width, justify in ((6, "left"), (NAME_WIDTH - 1, "left"), (9, "right")):
            line.add_column(width=width, justify=justify, no_wrap=True)
        line.add_column(width=THRESHOLD_WIDTH)  # a long one wraps between words, never cut
        line.add_column(ratio=1)
        line.add_row(
            STATUS_MARKUP[r.status],
            r.name,
            format_number(r.value),
            escape(r.threshold),
            f"[dim]{escape(r.detail)}[/]",
        )
        self.out.print(line, highlight=False)
        if r.passed is False and r.cause:  # what it points at; the summary names the causes
            self.out.print(
                Padding(f"[red]points at: {escape(r.cause)}[/]", (0, 0, 0, 7), expand=False),
                highlight=False,
            )
        if self.explain:
            self.out.print(
                Padding(f"[dim]asserts: {escape(r.description)}[/]", (0, 0, 0, 7), expand=False),
                highlight=False,
            )

    def summary(self, results, diagnosis, pairs_wanted: bool = False) -> None:
        from rich.markup import escape
        from rich.padding import Padding

        from minitx.core.data.imported_task import NO_PAIRS
        from minitx.core.doctor.diagnosis import NO_PROBLEMS

        counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "skip")}
        self.out.print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
        if pairs_wanted:  # once, how to run the checks that need examples
            self.out.print(f"[yellow]the checks of its weights need examples: {NO_PAIRS}; "
                           f"{escape(PAIRS_HINT)}[/]", highlight=False)
        if diagnosis.verdict == NO_PROBLEMS:
            self.out.print(f"[green]{NO_PROBLEMS}[/]")
            return
        self.out.print(f"[bold]verdict[/]: {escape(diagnosis.verdict)}", highlight=False)
        if diagnosis.causes:
            self.out.print("[bold]likely cause[/], most specific first:")
        elif diagnosis.suspects:
            self.out.print("[bold]likely causes, in order[/]:")
        for i, cause in enumerate(diagnosis.likely, 1):
            self.out.print(Padding(f"{i}. {escape(cause)}", (0, 0, 0, 2), expand=False), highlight=False)
            for e in diagnosis.causes[i - 1].evidence if diagnosis.causes else ():
                self.out.print(Padding(f"[dim]{e.kind:<8}{escape(e.check)}: {escape(e.figure)}[/]",
                                       (0, 0, 0, 5), expand=False), highlight=False)
