"""`minitx train`: the recipe's configs, overridden by the options given, run by core's Trainer.

Options default to None so that "not given" is visible: the recipe (or, with --resume, the
saved run) supplies every value the person did not type.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import click

from minitx.tui.commands.common import (
    LazyChoice,
    apply_threads,
    bug_names,
    parse_lengths,
    recipe_names,
    task_names,
    threads_option,
)

# option name -> ModelConfig field
MODEL_OPTIONS = {
    "d_model": "d_model",
    "heads": "n_heads",
    "d_ff": "d_ff",
    "encoder_layers": "n_encoder_layers",
    "decoder_layers": "n_decoder_layers",
    "dropout": "dropout",
    "positions": "max_len",
    "norm": "norm",
    "activation": "activation",
    "attention": "attention",
}
# option name -> TrainConfig field
TRAIN_OPTIONS = {
    "task": "task",
    "steps": "steps",
    "batch_size": "batch_size",
    "lr": "lr",
    "beta1": "beta1",
    "beta2": "beta2",
    "eps": "eps",
    "warmup": "warmup",
    "schedule": "schedule",
    "clip_grad_norm": "clip_grad_norm",
    "seed": "seed",
    "device": "device",
    "eval_every": "eval_every",
    "eval_size": "eval_size",
    "bug": "bug",
}


def _options(f):
    """The config options; each one's default is "whatever the recipe says"."""
    R = "[default: recipe]"
    opts = [
        click.option(
            "--recipe",
            type=LazyChoice(recipe_names),
            default=None,
            help="Named starting configuration; the options below override it. [default: the default recipe]",
        ),
        click.option("--task", type=LazyChoice(task_names), help=f"What to learn. {R}"),
        click.option("--lengths", metavar="MIN-MAX", help=f"Source lengths to train on, e.g. 4-10. {R}"),
        click.option("--steps", type=click.IntRange(min=1), help=f"Optimiser steps in total. {R}"),
        click.option("--batch-size", type=click.IntRange(min=1), help=f"Sequences per step. {R}"),
        click.option("--lr", type=float, help=f"Peak learning rate (Adam). {R}"),
        click.option("--beta1", type=float, help=f"Adam beta1. {R}"),
        click.option("--beta2", type=float, help=f"Adam beta2. {R}"),
        click.option("--eps", type=float, help=f"Adam epsilon. {R}"),
        click.option("--warmup", type=click.IntRange(min=0), help=f"Linear warmup steps. {R}"),
        click.option("--schedule", type=click.Choice(["flat", "cosine"]), help=f"LR after warmup. {R}"),
        click.option("--clip-grad-norm", type=float, help=f"Gradient-norm clipping. {R}"),
        click.option("--dropout", type=float, help=f"Dropout probability. {R}"),
        click.option("--d-model", type=click.IntRange(min=2), help=f"Model width. {R}"),
        click.option("--heads", type=click.IntRange(min=1), help=f"Attention heads. {R}"),
        click.option("--layers", type=click.IntRange(min=1), help="Encoder and decoder layers (sets both)."),
        click.option("--encoder-layers", type=click.IntRange(min=1), help=f"Encoder layers. {R}"),
        click.option("--decoder-layers", type=click.IntRange(min=1), help=f"Decoder layers. {R}"),
        click.option("--d-ff", type=click.IntRange(min=1), help=f"Feed-forward width. {R}"),
        click.option(
            "--positions",
            type=click.IntRange(min=3),
            help=f"Length of the positional table (model max_len). {R}",
        ),
        click.option("--norm", type=click.Choice(["post", "pre"]), help=f"LayerNorm placement. {R}"),
        click.option(
            "--activation",
            type=click.Choice(["relu", "gelu"]),
            help="Feed-forward activation. [default: relu for post-norm, gelu for pre]",
        ),
        click.option(
            "--attention",
            type=click.Choice(["explicit", "fused"]),
            help=f"Attention in training: explicit (softmax by hand) or fused (SDPA). {R}",
        ),
        click.option("--seed", type=click.IntRange(min=0), help=f"Seed for init and data. {R}"),
        click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), help=f"Where to train. {R}"),
        click.option(
            "--bug",
            type=LazyChoice(lambda: ["none", *bug_names()]),
            help="Train with a deliberate classic bug, to see what it looks like.",
        ),
        click.option(
            "--eval-every",
            type=click.IntRange(min=0),
            help=f"Held-out exact-match evaluation period in steps (0: only at the end). {R}",
        ),
        click.option("--eval-size", type=click.IntRange(min=1), help=f"Sequences per evaluation. {R}"),
        click.option(
            "--out",
            "out",
            type=click.Path(dir_okay=False),
            help="Checkpoint to write. [default: TASK.safetensors; with --resume, that file]",
        ),
        click.option(
            "--save-every",
            type=click.IntRange(min=0),
            default=0,
            help="Also save a resumable checkpoint every N steps (atomic). [default: off]",
        ),
        click.option(
            "--resume",
            type=click.Path(dir_okay=False),
            help="Continue a run from a resumable checkpoint (raise --steps to go further).",
        ),
        click.option(
            "--metrics",
            type=click.Path(dir_okay=False),
            help="Write one JSON object per logged step to this .jsonl file.",
        ),
        click.option(
            "--log-every",
            type=click.IntRange(min=1),
            help="Plain log lines every N steps instead of a progress bar. [default: 100]",
        ),
        threads_option,
        click.option("--quiet", "-q", is_flag=True, help="No progress output, only the result."),
        click.option("--json", "as_json", is_flag=True, help="Print the result as JSON."),
    ]
    for opt in reversed(opts + _other_train_options()):
        f = opt(f)
    return f


def _other_train_fields() -> list:
    """TrainConfig fields this file has no hand-written option for (added to core later): each
    still gets an option, so `train` always covers every field. core.config imports no torch."""
    import dataclasses

    from minitx.core.config import TrainConfig

    covered = set(TRAIN_OPTIONS.values()) | {"min_len", "max_len"}
    return [f for f in dataclasses.fields(TrainConfig) if f.name not in covered]


def _other_train_options() -> list:
    options = []
    for field in _other_train_fields():
        flag = field.name.replace("_", "-")
        help_text = f"TrainConfig.{field.name}. [default: recipe]"
        if isinstance(field.default, bool):
            options.append(click.option(f"--{flag}/--no-{flag}", field.name, default=None, help=help_text))
        else:
            options.append(
                click.option(f"--{flag}", field.name, type=type(field.default), default=None, help=help_text)
            )
    return options


@click.command("train")
@_options
def train_cmd(**opts) -> None:
    """Train a model and save it as a checkpoint.

    \b
    Examples:
      minitx train --out reverse.safetensors            # the default recipe
      minitx train --recipe reference --out ref.safetensors   # SPEC §5 exactly
      minitx train --task sort --steps 4000 --save-every 500 --out sort.safetensors
      minitx train --resume sort.safetensors --steps 6000
      minitx train --d-model 32 --layers 1 --steps 300 --metrics run.jsonl --out tiny.safetensors

    Ctrl-C saves a resumable checkpoint (continue it with --resume) and exits with 130.
    """
    apply_threads(opts["threads"])
    from minitx.core.train import Trainer

    out = opts["out"]
    if opts["resume"]:
        if opts["recipe"]:
            raise click.UsageError("--recipe cannot be combined with --resume: the run has its configs")
        saved_model, saved_train = _saved_configs(opts["resume"])
        model_cfg, train_cfg = _override(saved_model, saved_train, opts)
        _refuse_model_changes(saved_model, model_cfg, opts["resume"])
        trainer = Trainer.resume(opts["resume"], train_cfg)
        out = out or opts["resume"]
    else:
        from minitx.core.config import DEFAULT_RECIPE, recipe

        base = recipe(opts["recipe"] or DEFAULT_RECIPE)
        model_cfg, train_cfg = _override(base.model, base.train, opts)
        trainer = Trainer(model_cfg, train_cfg)
        out = out or f"{train_cfg.task}.safetensors"
    out_path = Path(out)
    _check_writable(out_path)
    if trainer.done:
        raise click.UsageError(
            f"the run is already at step {trainer.step_count} of {trainer.cfg.steps}; "
            "pass a larger --steps to continue it"
        )
    reporter = _Reporter(trainer, opts)
    from minitx.core.train import TrainingDiverged

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
    if trainer.last_accuracy is None or trainer.cfg.eval_every == 0:
        trainer.evaluate()  # the result always states the final accuracy
    trainer.save(out_path, resumable=True)
    _report_result(trainer, out_path, opts["as_json"])


def _override(model_cfg, train_cfg, opts):
    """Configs with every option that was given replacing the base value."""
    model_changes = {field: opts[name] for name, field in MODEL_OPTIONS.items() if opts[name] is not None}
    if opts["layers"] is not None:
        model_changes.setdefault("n_encoder_layers", opts["layers"])
        model_changes.setdefault("n_decoder_layers", opts["layers"])
    if opts["norm"] is not None and opts["activation"] is None:
        model_changes["activation"] = ""  # back to the norm's own default activation
    names = {**TRAIN_OPTIONS, **{f.name: f.name for f in _other_train_fields()}}
    train_changes = {field: opts[name] for name, field in names.items() if opts[name] is not None}
    if opts["lengths"] is not None:
        train_changes["min_len"], train_changes["max_len"] = parse_lengths(opts["lengths"])
    if opts["bug"] == "none":
        train_changes["bug"] = ""
    train_cfg = train_cfg.replace(**train_changes)
    if opts["positions"] is None and model_cfg.max_len < train_cfg.max_len + 2:
        model_changes["max_len"] = train_cfg.max_len + 2  # longer sources need a longer table
    return model_cfg.replace(**model_changes), train_cfg


def _saved_configs(path: str):
    """The model and training configs a resumable checkpoint was written with."""
    from minitx import checkpoints
    from minitx.core.checkpoint import CheckpointError
    from minitx.core.config import TrainConfig

    ckpt = checkpoints.load(path)
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


def _check_writable(path: Path) -> None:
    """Fail before training, not after minutes of it."""
    from minitx.core.checkpoint import CheckpointError

    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise CheckpointError(f"cannot write {path}: it is a directory")
    if not folder.is_dir():
        raise CheckpointError(f"cannot write {path}: folder {folder} does not exist")
    import os

    if not os.access(folder, os.W_OK):
        raise CheckpointError(f"cannot write {path}: folder {folder} is not writable")


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
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return stop["asked"] and not trainer.done


class _Metrics:
    """One JSON object per logged step; appended to on resume so one file holds the whole run."""

    def __init__(self, path: str | None, resume: bool) -> None:
        self.file = open(path, "a" if resume else "w", encoding="utf-8") if path else None

    def write(self, stats) -> None:
        if self.file is not None:
            self.file.write(json.dumps(stats.to_dict()) + "\n")
            self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def _describe_run(trainer) -> str:
    m, t = trainer.model_cfg, trainer.cfg
    from minitx.core.model import parameter_breakdown

    params = parameter_breakdown(trainer.model)["total"]
    bug = f" bug={t.bug}" if t.bug else ""
    return (
        f"training {t.task} {t.min_len}-{t.max_len} · {m.norm}-norm d_model {m.d_model} "
        f"heads {m.n_heads} layers {m.n_encoder_layers}+{m.n_decoder_layers} · {params:,} params · "
        f"steps {t.steps} batch {t.batch_size} lr {t.lr:g} {t.schedule} warmup {t.warmup} · "
        f"{trainer.device.type}{bug}"
    )


def _log_line(stats) -> str:
    line = (
        f"step {stats.step:>6}  loss {stats.loss:.4f}  grad {stats.grad_norm:.3f}  "
        f"lr {stats.lr:.2e}  {stats.examples_per_s:,.0f} ex/s"
    )
    if stats.accuracy is not None:
        line += f"  acc {stats.accuracy:.1%}"
    return line


class _Reporter:
    """Progress for one run: a Rich bar on a terminal, plain lines otherwise, plus metrics."""

    def __init__(self, trainer, opts) -> None:
        self.trainer = trainer
        self.quiet = opts["quiet"] or opts["as_json"]
        self.log_every = opts["log_every"]
        self.plain = self.log_every is not None or not sys.stdout.isatty()
        self.log_every = self.log_every or 100
        self.metrics = _Metrics(opts["metrics"], resume=bool(opts["resume"]))
        self.progress = None
        self.start_step = trainer.step_count
        self.started = time.perf_counter()

    def __enter__(self):
        if not self.quiet:
            click.echo(_describe_run(self.trainer))
        if not self.quiet and not self.plain:
            self._start_bar()
        return self

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()
        self.metrics.close()

    def _logged(self, stats) -> bool:
        return (
            stats.step == 1
            or stats.step % self.log_every == 0
            or stats.accuracy is not None
            or stats.step == self.trainer.cfg.steps
        )

    def update(self, stats) -> None:
        if self._logged(stats):
            self.metrics.write(stats)
            if not self.quiet and self.plain:
                click.echo(_log_line(stats))
        if self.progress is not None:
            self._advance(stats)

    # -- the progress bar ------------------------------------------------------------------
    def _start_bar(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeRemainingColumn(),
            transient=False,
        )
        self.task_id = self.progress.add_task(
            "train", total=self.trainer.cfg.steps, completed=self.trainer.step_count, info=""
        )
        self.progress.start()
        self.last_accuracy = self.trainer.last_accuracy

    def _advance(self, stats) -> None:
        if stats.accuracy is not None:
            self.last_accuracy = stats.accuracy
        elapsed = time.perf_counter() - self.started
        speed = (stats.step - self.start_step) / elapsed if elapsed > 0 else 0.0
        acc = f"  acc {self.last_accuracy:.1%}" if self.last_accuracy is not None else ""
        info = (
            f"loss {stats.loss:.4f}  grad {stats.grad_norm:.2f}  lr {stats.lr:.1e}  {speed:.0f} steps/s{acc}"
        )
        self.progress.update(self.task_id, completed=stats.step, info=info)


def _report_result(trainer, out_path: Path, as_json: bool) -> None:
    summary = trainer.summary()
    if as_json:
        from minitx.tui.commands.common import echo_json

        echo_json(
            {
                "checkpoint": str(out_path),
                "summary": summary,
                "model_config": trainer.model_cfg.to_dict(),
                "train_config": trainer.cfg.to_dict(),
            }
        )
        return
    acc = trainer.last_accuracy
    click.echo(
        f"final exact match {acc:.1%} on {trainer.cfg.eval_size} fresh sequences "
        f"· loss {summary['loss']:.4f} · {trainer.seconds:.0f} s"
    )
    click.echo(f"saved {out_path} (resumable; share it with: minitx export {out_path} --out FILE)")
