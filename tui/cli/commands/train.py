"""`minitx train`: the recipe's configs, overridden by the options given, run by core's Trainer.

Options default to None so that "not given" is visible: the recipe (or, with --resume, the
saved run) supplies every value the person did not type. Turning options into configs is
minitx.core.options' job (through model_options.configs), the same as for `doctor` and the app.
"""

from __future__ import annotations

import shutil
import signal
import sys
import time
from pathlib import Path

import click

from minitx.core.training.events import RunListener
from minitx.core.training.run_files import next_run_number, run_name, run_path
from minitx.tui.cli import model_options
from minitx.tui.cli.common import (
    LANGUAGES_KEY,
    BadArgument,
    apply_threads,
    checkpoint_out,
    field_lines,
    json_text,
    load_checkpoint_arg,
    process_started,
    threads_option,
)
from minitx.tui.cli.output import quiet_stderr, quiet_stdout
from minitx.tui.cli.train_progress import Reporter, SaveEvery, fine_tune_scores, guided_json, watch_lines

RUN_OPTIONS = [
    click.option("--out", "out", type=click.Path(dir_okay=False),
                 help="Checkpoint to write. [default: TASK-runN.safetensors, the first N no earlier "
                      "run has; with --resume, that file]"),
    click.option("--force", is_flag=True,
                 help="Write over an existing --out file (without it, an existing file that is not "
                      "the run being continued is refused)."),
    click.option("--save-every", type=click.IntRange(min=0), default=0,
                 help="Also save a resumable checkpoint every N steps (atomic). [default: off]"),
    click.option("--resume", type=click.Path(dir_okay=False),
                 help="Continue a run from a resumable checkpoint (raise --steps to go further)."),
    click.option("--restart-schedule", is_flag=True,
                 help="With --resume: a new learning-rate schedule (warmup, then the decay to its "
                      "floor at --steps) from the saved weights, instead of going on at the lr the "
                      "run had reached. How to train a finished run further."),
    click.option("--metrics", type=click.Path(dir_okay=False),
                 help="Write one JSON object per step and per evaluation to this .jsonl file "
                      "(see docs/curves.md; draw it with minitx curves)."),
    click.option("--tensorboard", metavar="DIR", type=click.Path(file_okay=False),
                 help="Also write TensorBoard event files to DIR (loss, lr, BLEU, chrF, forgetting, "
                      "probes; Trainer's tag names). Needs pip install 'minitx[tensorboard]'."),
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
                      + model_options.FINE_TUNE_OPTIONS + model_options.COURSE_OPTIONS
                      + model_options.LORA_OPTIONS + model_options.GUIDED_OPTIONS
                      + model_options.MEMORY_OPTIONS
                      + model_options.MODEL_OPTIONS + RUN_OPTIONS)
def train_cmd(**opts) -> None:
    """Train a model and save it as a checkpoint.

    \b
    Examples:
      minitx train                                   # the default (fast) recipe
      minitx train --recipe reference --out ref.safetensors
      minitx train --task sort --save-every 500 --out sort.safetensors
      minitx train --resume sort.safetensors --steps 6000
      minitx train --resume sort.safetensors --steps 9000 --restart-schedule
      minitx train --d-model 32 --layers 1 --metrics run.jsonl  # a small model
      minitx train --position-encoding rope --out rope.safetensors  # one swap
      minitx train --recipe modern --out modern.safetensors  # RMSNorm, RoPE, ...
      minitx train --until 99% --steps 3000          # stop once it is good enough
      minitx train --data pairs.tsv --out mine.safetensors   # your own pairs
      minitx train --data train.tsv --valid valid.tsv --tokens word
      minitx train --task dates --steps 3000 --out dates.safetensors
      minitx train --init opus-mt-en-de/ --data mine.tsv --out ft.safetensors
      minitx train --init nllb/ --data kde4.jsonl \\
          --src-lang eng_Latn --tgt-lang fra_Latn  # a Hub set's en/fr keys
      minitx train --init opus-mt-en-fr/ --data mine.tsv --keep-best bleu
      minitx train --init t5-small --data mine.tsv --patience 3 --tensorboard tb
      minitx train --init opus-mt-en-de/ --data mine.tsv --lora 8  # adapters only
      minitx train --init mt/ --data m.tsv --alignments m.talp --guided-head 5:1
      torchrun --nproc_per_node 8 -m minitx train --init t5-small --data big.tsv

    docs/training.md describes the recipes, docs/components.md the component switches
    (--norm-kind, --position-encoding, --activation swiglu, --kv-heads; `minitx lab` compares
    them side by side), docs/data.md training on your own pairs. Ctrl-C, a closed terminal
    (SIGHUP) or SIGTERM saves a resumable checkpoint (continue it with --resume) and exits
    with 130, 129 or 143; a closed output pipe only quiets the progress. The checkpoint keeps the run's
    curves and attention snapshots (minitx curves FILE draws them; docs/curves.md). On resume a
    larger --steps never raises the learning rate: a run whose schedule had ended goes on at its
    final lr, and says so; --restart-schedule gives it a new schedule instead.
    """
    apply_threads(opts["threads"])
    from minitx.core.training.memory_estimate import BF16_EMULATED, bf16_is_fast
    from minitx.core.training.trainer import TrainingDiverged

    trainer, out_path, tensorboard = _prepare(opts)
    out, err = quiet_stdout(), quiet_stderr()
    lead = trainer.processes.main  # under torchrun only the first process prints and writes
    if not lead:
        opts = {**opts, "quiet": True, "metrics": None}
    if not opts["quiet"]:
        for note in trainer.task.notes():  # a data file's skipped pairs, once
            err.write(f"note: {note}\n")
        if trainer.schedule_ended and not opts["restart_schedule"]:
            err.write(schedule_ended_note(trainer, opts["resume"]) + "\n")
        if opts["forget_alarm"] is not None and not trainer.cfg.general:
            err.write("note: --forget-alarm watches the --general pairs' loss; without --general no "
                      "alarm can go off\n")
        if trainer.guide is not None:  # guided alignment: what it cannot teach or measure
            for note in trainer.guide.notes():
                err.write(f"note: {note}\n")
        if trainer.cfg.precision == "bf16" and not bf16_is_fast(trainer.device):
            err.write(f"note: {BF16_EMULATED}\n")
        if trainer.cfg.init and trainer.cfg.watch and trainer.watcher is None and trainer.processes.main:
            err.write(f"note: not watched: {trainer.cfg.init} no longer loads with the weights this "
                      "fine-tune started from, so there is no base to compare with\n")
    reporter = Reporter(trainer, out, quiet=opts["quiet"] or opts["as_json"], log_every=opts["log_every"],
                        metrics=opts["metrics"], resume=bool(opts["resume"]))
    listeners = [reporter] + ([SaveEvery(out_path, opts["save_every"])] if opts["save_every"] else []) \
        + ([tensorboard] if tensorboard is not None else [])
    loop_start = time.perf_counter()
    # From here until the file is written a signal stops the run, never a save (StopOnSignal).
    with StopOnSignal(err, out_path if lead else None) as signals:
        with reporter:
            try:
                trainer.run(*listeners, signals)
            except TrainingDiverged as e:  # the trainer kept the last good step: keep it on disk too
                if tensorboard is not None:
                    tensorboard.close()
                if trainer.step_count == 0:
                    raise
                trainer.save(out_path, resumable=True)
                raise click.ClickException(f"{e}; step {trainer.step_count} saved to {out_path}"
                                           if lead else "") from None
            stopped = signals.caught is not None and not trainer.done
            if not stopped and (trainer.last_accuracy is None or trainer.cfg.eval_every == 0):
                reporter.evaluated_after(trainer, trainer.evaluate())  # the result always states it
        if tensorboard is not None:  # every event so far in its file, however the run ended
            tensorboard.close()
        if stopped:
            trainer.save(out_path, resumable=True)
            if lead:
                err.write(f"{signals.name} at step {trainer.step_count}/{trainer.cfg.steps}: resumable "
                          f"checkpoint saved to {out_path}, {_kept(trainer)} (continue: minitx train "
                          f"--resume {out_path})\n")
            sys.exit(128 + signals.caught)
        save_start = time.perf_counter()
        trainer.save(out_path, resumable=True)
    timings = {"startup": loop_start - process_started(), "loop": save_start - loop_start,
               "training": trainer.seconds_this_run, "evaluation": trainer.eval_seconds,
               "saving": time.perf_counter() - save_start}
    if not lead:
        return
    _report_result(trainer, out_path, out, opts["as_json"], timings)
    if out.gone:  # say where the result went, since stdout could not
        err.write(f"note: standard output was closed ({out.closed_at}); the run went on to step "
                  f"{trainer.step_count} and saved {out_path}\n")


def _prepare(opts):
    """(trainer, where it saves) from the options, before any training: every problem with
    the options, the files or the saved run is a usage error (exit 2)."""
    from minitx import checkpoints
    from minitx.core.checkpoint import CheckpointError, check_writable
    from minitx.core.options import option_for_field
    from minitx.core.training.trainer import Trainer

    if opts["restart_schedule"] and not opts["resume"]:
        raise click.UsageError("--restart-schedule applies to a resumed run: give --resume FILE")
    if click.get_current_context().meta.get(LANGUAGES_KEY) and not (opts["init"] or opts["data"]):
        raise click.UsageError("--src-lang and --tgt-lang name the languages of --data's pairs and of a "
                               "fine-tune's base: give --data PAIRS (a resumed run keeps its own)")
    if opts["out"]:
        checkpoint_out(opts["out"])
    try:
        if opts["init"]:
            trainer = _fine_tune(opts)
            name = run_name(trainer.cfg.task, trainer.cfg.data)
            out_path = Path(opts["out"]) if opts["out"] else run_path(".", name, next_run_number(".", name))
        elif opts["resume"]:
            if opts["recipe"]:
                raise click.UsageError("--recipe cannot be combined with --resume: the run has its configs")
            saved = load_checkpoint_arg(opts["resume"])  # cannot be found or read: exit 2
            saved_model, saved_train = saved.model_config, saved.train_config
            if saved_train is None or not saved.resumable:
                raise CheckpointError(f"{opts['resume']} holds no training state (an exported file?); "
                                      "it cannot be resumed")
            model_cfg, train_cfg = model_options.configs(saved_model, saved_train, opts)
            trainer = Trainer.resume(opts["resume"], train_cfg, model_cfg, opts["restart_schedule"],
                                     _watch_base(saved), open_base=checkpoints.open_base)
            out_path = Path(opts["out"] or opts["resume"])
        else:
            model_cfg, train_cfg = model_options.configs(*model_options.recipe_configs(opts["recipe"]), opts)
            trainer = Trainer(model_cfg, train_cfg)
            name = run_name(trainer.cfg.task, trainer.cfg.data)
            out_path = Path(opts["out"]) if opts["out"] else run_path(".", name, next_run_number(".", name))
        check_writable(out_path)  # fail before training, not after minutes of it
        _refuse_to_overwrite(out_path, opts)
        if opts["metrics"]:
            check_writable(Path(opts["metrics"]))
        if trainer.cfg.keep_best and trainer.processes.main:
            trainer.best_path = _best_file(out_path, opts)
        tensorboard = None
        if opts["tensorboard"] and trainer.processes.main:
            from minitx.core.training.tensorboard_log import TensorBoardLog

            tensorboard = TensorBoardLog(opts["tensorboard"])  # ValueError naming the extra
    except (CheckpointError, ValueError) as e:
        if isinstance(e, click.ClickException):
            raise
        field, _, message = str(e).partition(": ")
        if message and field in config_fields():  # a setting core refused: name its option
            raise click.BadParameter(message, param_hint=f"--{option_for_field(field).replace('_', '-')}") \
                from None
        raise BadArgument(str(e)) from None
    if trainer.done:
        raise click.UsageError(
            f"the run is already at step {trainer.step_count} of {trainer.cfg.steps}; "
            "pass a larger --steps to continue it"
        )
    _warn_if_shadowed(out_path)
    return trainer, out_path, tensorboard


def _best_file(out_path: Path, opts) -> Path:
    """Where --keep-best keeps the best weights: NAME.best.safetensors beside the run's file,
    refused where another run's file is there (as --out is)."""
    from minitx.core.checkpoint import check_writable
    from minitx.core.training.best import best_path

    path = best_path(out_path)
    check_writable(path)
    if path.exists() and not opts["force"] and not opts["resume"]:
        raise click.BadParameter(f"{path} exists already (another run's best weights?); give --force to "
                                 "write over it, or another --out", param_hint="--keep-best")
    return path


# Options that shape a model or choose its task: a fine-tune's come from its base (--init).
NOT_WITH_INIT = ("recipe", "task", "lengths", "bug", "tokens", "expect", "resume", "restart_schedule")


def _refuse_beside_init(opts) -> None:
    """An architecture or task option beside --init: one line naming it."""
    from minitx.core.options import MODEL_OPTIONS

    for name in [*(n for n in MODEL_OPTIONS if n != "dropout"), "layers", *NOT_WITH_INIT]:
        if opts.get(name) not in (None, False):
            flag = "--" + name.replace("_", "-")
            raise click.UsageError(f"{flag} cannot be combined with --init: a fine-tune's architecture, "
                                   "task and tokenisers are its base model's")
    if not opts["data"]:
        raise click.UsageError("--init needs --data PAIRS: the pairs to fine-tune on")


def _fine_tune(opts):
    """A Trainer fine-tuning --init's model on --data, its family's defaults under the options."""
    from minitx.core.config import TrainConfig
    from minitx.core.data.task import DATA_TASK
    from minitx.core.training.fine_tune import family_of, fine_tune_defaults, folder_dropout
    from minitx.core.training.trainer import Trainer

    _refuse_beside_init(opts)
    try:
        base = load_checkpoint_arg(opts["init"])  # not a model: exit 2, naming it
    except BadArgument as e:
        raise BadArgument(f"--init: {e}") from None
    defaults = fine_tune_defaults(family_of(base.task), opts["optimizer"] or "adamw",
                                  lora=bool(opts.get("lora_rank")))
    train_cfg = TrainConfig(task=DATA_TASK, data=opts["data"], init=opts["init"], **defaults)
    dropout = folder_dropout(base.task)  # a folder's config.json; else the checkpoint's own
    model_cfg = base.model_config if dropout is None else base.model_config.replace(dropout=dropout)
    model_cfg, train_cfg = model_options.configs(model_cfg, train_cfg, opts)
    if train_cfg.max_length > model_cfg.max_len:  # a cut past the positions would cut nothing
        raise click.BadParameter(f"{train_cfg.max_length} is more than the {model_cfg.max_len} positions "
                                 f"{opts['init']} holds (give at most {model_cfg.max_len}; 0: all of them)",
                                 param_hint="--max-length")
    # the base goes to the run: a bf16 LoRA makes its matrices bf16 where they are
    return Trainer(model_cfg, train_cfg, base=base, check_memory=opts["memory_check"], base_given=True)


def _watch_base(saved):
    """A resumed fine-tune's base, to go on watching against: its --init model where that still
    loads with the weights the file records (sha256); None otherwise (the run is not watched)."""
    from minitx.core.training.fine_tune import is_recorded_base

    train = saved.train_config
    if train is None or not train.init or not train.watch or saved.lora is not None:
        return None  # (a LoRA run watches its own model with the adapters off)
    try:
        base = load_checkpoint_arg(train.init)
    except BadArgument:
        return None
    return base.model if is_recorded_base(saved, base.model) else None


def schedule_ended_note(trainer, path: str) -> str:
    """What a resumed run whose cosine schedule had ended trains at, and how to train it further."""
    lr = trainer.lr_for(trainer.step_count + 1)
    return (f"note: this run's schedule ended at step {trainer.step_count} (lr {lr:.2g}, its floor): the "
            f"new steps train at that lr. For a new schedule from these weights: minitx train --resume "
            f"{path} --steps {trainer.cfg.steps} --restart-schedule")


def config_fields() -> set[str]:
    import dataclasses

    from minitx.core.config import ModelConfig, TrainConfig

    return {f.name for cfg in (ModelConfig, TrainConfig) for f in dataclasses.fields(cfg)}


def _refuse_to_overwrite(path: Path, opts) -> None:
    """An existing file is written over only when it is the run being continued, or with --force."""
    if not path.exists() or opts["force"]:
        return
    if opts["resume"] and path.resolve() == Path(opts["resume"]).resolve():
        return
    raise click.BadParameter(f"{path} exists already (another run's file?); give --force to write over it, "
                             "or another --out", param_hint="--out")


def _warn_if_shadowed(path: Path) -> None:
    """A file called like a bundled model is reached by its path, never by its bare name."""
    from minitx import checkpoints

    if path.suffix == checkpoints.SUFFIX and path.stem in checkpoints.bundled_names():
        click.echo(
            f"note: '{path.stem}' alone names the bundled model; use the path {path} for this run's "
            "checkpoint (e.g. minitx decode " + str(path) + ' "3 1 4 1 5")',
            err=True,
        )


def _kept(trainer) -> str:
    """What a stopped run's file holds, in words: 'step 594, exact match 46.4% on 2000 fresh
    sequences' (measured on the weights saved)."""
    n = trainer.task.evaluation_count(trainer.cfg.eval_size)
    return f"exact match {trainer.last_accuracy:.1%} on {n} {trainer.task.evaluated_on}"


class StopOnSignal(RunListener):
    """Ctrl-C, a closed terminal (SIGHUP) or a scheduler's SIGTERM stops the run between two
    steps: the step in flight finishes, so the weights and optimiser state it saves agree. Until
    the file is written, further signals are ignored (each Ctrl-C of an impatient person must
    not abandon the save); `err` says so once. Ctrl-\\ (SIGQUIT) still ends it at once."""

    SIGNALS = ("SIGINT", "SIGHUP", "SIGTERM")
    NAMES = {"SIGINT": "Interrupted", "SIGHUP": "Hung up", "SIGTERM": "Terminated"}

    def __init__(self, err=None, path=None) -> None:
        self.caught: int | None = None  # the signal's number
        self.name = ""
        self.err = err
        self.path = path  # where the run will be saved: said at the first signal
        self.ignored = 0  # signals after the first
        self._previous: dict[int, object] = {}

    def __enter__(self):
        for name in self.SIGNALS:
            number = getattr(signal, name, None)
            if number is None:
                continue
            try:
                self._previous[number] = signal.signal(number, self._caught)
            except ValueError:  # not the main thread: signals cannot reach us anyway
                pass
        return self

    def __exit__(self, *exc) -> None:
        for number, previous in self._previous.items():
            signal.signal(number, previous)

    def _caught(self, signum, frame) -> None:
        if self.caught is None:
            self.caught = signum
            self.name = self.NAMES[signal.Signals(signum).name]
            # at once: the step in flight (an evaluation, a save) may take a while, and a person
            # who hears nothing presses again
            where = f" to {self.path}" if self.path else ""
            self._say(f"{self.name}: finishing this step, then saving{where}; Ctrl-C again is ignored "
                      "until it is written (Ctrl-\\ quits at once, without saving)")
            return
        self.ignored += 1
        if self.ignored == 1:
            self._say("Ctrl-C again is ignored until the checkpoint is written (Ctrl-\\ quits at once, "
                      "without saving)")

    def _say(self, line: str) -> None:
        if self.err is None:
            return
        try:  # the main thread may be inside a write to the same stream: then say nothing
            self.err.write(line + "\n")
        except (RuntimeError, OSError, ValueError):
            pass

    def stop_requested(self, trainer) -> bool:
        return self.caught is not None


def _watch_json(trainer) -> dict:
    """A watched fine-tune's forgetting object, and its probes' last outputs beside the base's."""
    from minitx.core.training.watching import last_probes

    probes = [{k: v for k, v in r.info().items() if k in ("source", "output", "base_output", "changed")}
              for r in last_probes(trainer.history)]
    return {"forgetting": trainer.watcher.forgetting_dict(trainer.history), "probes": probes}


def _best_json(trainer) -> dict:
    """--keep-best's and --patience's: the best evaluation (its metric, step, value and file) and
    where early stopping stopped the run."""
    out = {}
    if trainer.best is not None:
        saved = trainer.best_file
        out["best"] = {**trainer.best.to_dict(), "checkpoint": str(saved[1]) if saved else None}
    if trainer.cfg.patience:
        out["stopped_early_at"] = trainer.stopped_early_at
    return out


def _report_result(trainer, out_path: Path, out, as_json: bool, timings: dict[str, float]) -> None:
    summary = trainer.summary()
    if as_json:
        out.write(json_text(
            {
                "checkpoint": str(out_path),
                "summary": summary,
                "model_config": trainer.model_cfg.to_dict(),
                "train_config": trainer.cfg.to_dict(),
                "until_reached_at": trainer.until_reached_at,
                "seconds_this_run": round(trainer.seconds_this_run, 3),
                # where this run's time went: the loop holds training and evaluation
                "timings": {k: round(v, 3) for k, v in timings.items()},
                **(_watch_json(trainer) if trainer.watcher is not None else {}),
                **_best_json(trainer),
                **(guided_json(trainer) if trainer.guide is not None else {}),
            }
        ) + "\n")
        return
    acc, task = trainer.last_accuracy, trainer.task
    if trainer.stopped_early_at is not None:
        out.write(trainer.stopped_early_line() + "\n")
    if trainer.until_reached_at is not None:
        out.write(f"reached {acc:.1%} exact match at step {trainer.until_reached_at} "
                  f"(--until {trainer.cfg.until:.1%}; --steps allowed {trainer.cfg.steps})\n")
    resumed = trainer.seconds_at_start > 0
    # this run's wall time holds its evaluations (a fine-tune's greedy decoding: often most of it)
    in_all = f"; {trainer.seconds:.0f} s of training in all" if resumed else ""
    took = (f"{trainer.seconds_this_run + trainer.eval_seconds:.0f} s this run "
            f"({trainer.eval_seconds:.0f} s evaluating{in_all})")
    n = task.evaluation_count(trainer.cfg.eval_size)
    width = shutil.get_terminal_size().columns  # COLUMNS, else the terminal's, else 80
    # A fine-tune's held-out loss (what its base -> fine-tuned line compares); else the figure is
    # the last training batch's, and says so.
    loss = (f"held-out loss {trainer.last_scores['loss']:.4f}" if trainer.cfg.init and trainer.last_scores
            and trainer.last_scores['loss'] is not None
            else f"last batch's loss {summary['loss']:.4f}")
    # Broken between fields where the terminal is narrow, never one word left on a line.
    final = [f"final exact match {acc:.1%} on {n} {task.evaluated_on}", loss, took]
    out.write(field_lines(final, width).plain + "\n")
    scores = fine_tune_scores(trainer)
    if scores:  # the base -> the fine-tuned weights, on the same held-out pairs
        first, *rest = scores.split(" · ")
        out.write(field_lines([f"base -> fine-tuned ({n} {task.evaluated_on}): {first}", *rest], width).plain
                  + "\n")
        for name, key in (("BLEU", "bleu_signature"), ("chrF", "chrf_signature")):
            out.write(f"  {name}: sacrebleu {trainer.last_scores[key]}\n")
    for line in watch_lines(trainer, width):
        out.write(line + "\n")
    if trainer.best_file is not None:
        step, path = trainer.best_file
        out.write(field_lines([f"{trainer.best.line()} (--keep-best)", f"saved {path}"], width).plain + "\n")
    out.write(field_lines([f"saved {out_path}", "resumable; `minitx export` makes a copy to share"],
                          width).plain + "\n")
