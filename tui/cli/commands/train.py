"""`minitx train`: the recipe's configs, overridden by the options given, run by core's Trainer.

Options default to None so that "not given" is visible: the recipe (or, with --resume, the
saved run) supplies every value the person did not type. Turning options into configs is
minitx.core.options' job (through model_options.configs), the same as for `doctor` and the app.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import click

from minitx.tui.cli import model_options
from minitx.tui.cli.common import apply_threads, threads_option
from minitx.tui.cli.train_progress import Reporter

RUN_OPTIONS = [
    click.option("--out", "out", type=click.Path(dir_okay=False),
                 help="Checkpoint to write. [default: TASK-run.safetensors, numbered so that no "
                      "earlier run is overwritten; with --resume, that file]"),
    click.option("--save-every", type=click.IntRange(min=0), default=0,
                 help="Also save a resumable checkpoint every N steps (atomic). [default: off]"),
    click.option("--resume", type=click.Path(dir_okay=False),
                 help="Continue a run from a resumable checkpoint (raise --steps to go further)."),
    click.option("--metrics", type=click.Path(dir_okay=False),
                 help="Write one JSON object per step and per evaluation to this .jsonl file "
                      "(see docs/curves.md; draw it with minitx curves)."),
    click.option("--log-every", type=click.IntRange(min=1),
                 help="Plain log lines every N steps instead of a progress bar "
                      "(without a terminal: every 100)."),
    threads_option,
    click.option("--quiet", "-q", is_flag=True, help="No progress output, only the result."),
    click.option("--json", "as_json", is_flag=True, help="Print the result as JSON."),
]


@click.command("train")
@model_options.recipe_option
@model_options.apply(model_options.TASK_OPTIONS + model_options.TRAINING_OPTIONS
                      + model_options.MODEL_OPTIONS + RUN_OPTIONS)
def train_cmd(**opts) -> None:
    """Train a model and save it as a checkpoint.

    \b
    Examples:
      minitx train                                   # the default (fast) recipe
      minitx train --recipe reference --out ref.safetensors
      minitx train --task sort --save-every 500 --out sort.safetensors
      minitx train --resume sort.safetensors --steps 6000
      minitx train --d-model 32 --layers 1 --metrics run.jsonl  # a small model
      minitx train --position-encoding rope --out rope.safetensors  # one swap
      minitx train --recipe modern --out modern.safetensors  # RMSNorm, RoPE, ...
      minitx train --until 99% --steps 3000          # stop once it is good enough
      minitx train --data pairs.tsv --out mine.safetensors   # your own pairs
      minitx train --data train.tsv --valid valid.tsv --tokens word
      minitx train --task dates --steps 3000 --out dates.safetensors

    docs/training.md describes the recipes, docs/components.md the component switches
    (--norm-kind, --position-encoding, --activation swiglu, --kv-heads; `minitx lab` compares
    them side by side), docs/data.md training on your own pairs. Ctrl-C saves a resumable
    checkpoint (continue it with --resume) and exits with 130. The checkpoint keeps the run's
    curves and attention snapshots (minitx curves FILE draws them; docs/curves.md). On resume a
    larger --steps never raises the learning rate.
    """
    apply_threads(opts["threads"])
    from minitx.core.training.trainer import Trainer, TrainingDiverged

    if opts["resume"]:
        if opts["recipe"]:
            raise click.UsageError("--recipe cannot be combined with --resume: the run has its configs")
        saved_model, saved_train = _saved_configs(opts["resume"])
        model_cfg, train_cfg = model_options.configs(saved_model, saved_train, opts)
        _refuse_model_changes(saved_model, model_cfg, opts["resume"])
        trainer = Trainer.resume(opts["resume"], train_cfg)
        out_path = Path(opts["out"] or opts["resume"])
    else:
        model_cfg, train_cfg = model_options.configs(*model_options.recipe_configs(opts["recipe"]), opts)
        trainer = Trainer(model_cfg, train_cfg)
        stem = Path(train_cfg.data).stem if train_cfg.data else train_cfg.task
        out_path = Path(opts["out"]) if opts["out"] else unused_run_path(stem)
    from minitx.core.checkpoint import check_writable

    check_writable(out_path)  # fail before training, not after minutes of it
    if trainer.done:
        raise click.UsageError(
            f"the run is already at step {trainer.step_count} of {trainer.cfg.steps}; "
            "pass a larger --steps to continue it"
        )
    _warn_if_shadowed(out_path)
    if not opts["quiet"]:
        for note in trainer.task.notes():  # a data file's skipped pairs, once
            click.echo(f"note: {note}", err=True)
    reporter = Reporter(trainer, quiet=opts["quiet"] or opts["as_json"], log_every=opts["log_every"],
                        metrics=opts["metrics"], resume=bool(opts["resume"]))
    loop_start = time.perf_counter()
    try:
        interrupted = _run(trainer, reporter, out_path, opts["save_every"])
    except TrainingDiverged as e:  # the trainer kept the last good step: keep it on disk too
        if trainer.step_count == 0:
            raise
        trainer.save(out_path, resumable=True)
        raise click.ClickException(f"{e}; step {trainer.step_count} saved to {out_path}") from None
    if interrupted:
        trainer.save(out_path, resumable=True)
        click.echo(
            f"Interrupted at step {trainer.step_count}/{trainer.cfg.steps}; resumable checkpoint "
            f"saved to {out_path} (continue: minitx train --resume {out_path})",
            err=True,
        )
        sys.exit(130)
    save_start = time.perf_counter()
    trainer.save(out_path, resumable=True)
    timings = {"loop": save_start - loop_start, "training": trainer.seconds_this_run,
               "evaluation": trainer.eval_seconds, "saving": time.perf_counter() - save_start}
    _report_result(trainer, out_path, opts["as_json"], timings)


def unused_run_path(task: str, folder: Path = Path(".")) -> Path:
    """TASK-run.safetensors, or TASK-run2, -run3, ... when that exists: a run without --out
    never overwrites an earlier one, and its name never hides a bundled model's."""
    for n in range(1, 10_000):
        path = folder / f"{task}-run{n if n > 1 else ''}.safetensors"
        if not path.exists():
            return path
    raise click.UsageError(f"every {task}-runN.safetensors name is taken here; give --out")


def _warn_if_shadowed(path: Path) -> None:
    """A file called like a bundled model is reached by its path, never by its bare name."""
    from minitx import checkpoints

    if path.suffix == checkpoints.SUFFIX and path.stem in checkpoints.bundled_names():
        click.echo(
            f"note: '{path.stem}' alone names the bundled model; use the path {path} for this run's "
            "checkpoint (e.g. minitx decode " + str(path) + ' "3 1 4 1 5")',
            err=True,
        )


def _saved_configs(path: str):
    """The model and training configs a resumable checkpoint was written with."""
    import json

    from minitx.core.checkpoint import CheckpointError
    from minitx.core.config import TrainConfig
    from minitx.tui.cli.common import load_checkpoint_arg

    ckpt = load_checkpoint_arg(path)  # one that cannot be found or read: exit 2, like other commands
    if not ckpt.resumable:
        raise CheckpointError(f"{path} holds no training state (an exported file?); it cannot be resumed")
    try:
        train_cfg = TrainConfig.from_dict(json.loads(ckpt.metadata["train_config"]))
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{path} has invalid training metadata: {e}") from None
    return ckpt.model_config, train_cfg


def _refuse_model_changes(saved, asked, path) -> None:
    from minitx.core.checkpoint import CheckpointError

    for key, value in saved.to_dict().items():
        if getattr(asked, key) != value:
            raise CheckpointError(
                f"cannot resume {path}: its model {key} is {value!r}, the run asks for "
                f"{getattr(asked, key)!r}"
            )


def _run(trainer, reporter, out_path: Path, save_every: int) -> bool:
    """Train to the end; True if Ctrl-C stopped it. The first Ctrl-C only sets a flag, so the
    step in flight finishes and the saved weights and optimiser state are consistent; a second
    Ctrl-C interrupts at once."""
    stop = {"asked": False}

    def on_sigint(signum, frame):
        stop["asked"] = True
        signal.signal(signal.SIGINT, previous)

    previous = None
    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread: Ctrl-C cannot reach us anyway
        pass

    def callback(stats):
        reporter.update(stats)
        if save_every and stats.step % save_every == 0 and stats.step < trainer.cfg.steps:
            trainer.save(out_path, resumable=True)

    try:
        with reporter:
            trainer.run(callback, should_stop=lambda: stop["asked"])
            interrupted = stop["asked"] and not trainer.done
            if not interrupted and (trainer.last_accuracy is None or trainer.cfg.eval_every == 0):
                result = trainer.evaluate()  # the result always states the final accuracy
                reporter.evaluated(trainer.step_count, result.accuracy)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return interrupted


def _report_result(trainer, out_path: Path, as_json: bool, timings: dict[str, float]) -> None:
    summary = trainer.summary()
    if as_json:
        from minitx.tui.cli.common import echo_json

        echo_json(
            {
                "checkpoint": str(out_path),
                "summary": summary,
                "model_config": trainer.model_cfg.to_dict(),
                "train_config": trainer.cfg.to_dict(),
                "until_reached_at": trainer.until_reached_at,
                "seconds_this_run": round(trainer.seconds_this_run, 3),
                # where this run's time went: the loop holds training and evaluation
                "timings": {k: round(v, 3) for k, v in timings.items()},
            }
        )
        return
    acc, task = trainer.last_accuracy, trainer.task
    if trainer.until_reached_at is not None:
        click.echo(f"reached {acc:.1%} exact match at step {trainer.until_reached_at} "
                   f"(--until {trainer.cfg.until:.1%}; --steps allowed {trainer.cfg.steps})")
    resumed = trainer.seconds_at_start > 0
    in_all = f" ({trainer.seconds:.0f} s in all)" if resumed else ""
    n = task.evaluation_count(trainer.cfg.eval_size)
    click.echo(
        f"final exact match {acc:.1%} on {n} {task.evaluated_on} "
        f"· loss {summary['loss']:.4f} · {trainer.seconds_this_run:.0f} s this run{in_all}"
    )
    click.echo(f"saved {out_path} (resumable; `minitx export` makes a copy to share)")
