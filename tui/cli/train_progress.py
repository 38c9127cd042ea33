"""What `minitx train` shows while it runs: a Rich progress bar on a terminal, plain log lines
otherwise (or with --log-every), and the --metrics file."""

from __future__ import annotations

import json
import sys
import time

import click


class Metrics:
    """One JSON object per step ({"kind": "step", ...}) and one per evaluation ({"kind": "eval",
    "step", "accuracy", "n"}); appended to on resume so one file holds the whole run."""

    def __init__(self, path: str | None, resume: bool) -> None:
        self.file = open(path, "a" if resume else "w", encoding="utf-8") if path else None

    def write_step(self, stats) -> None:
        row = {k: v for k, v in stats.to_dict().items() if k != "accuracy"}
        self._write({"kind": "step", **row})

    def write_eval(self, step: int, accuracy: float, n: int) -> None:
        self._write({"kind": "eval", "step": step, "accuracy": accuracy, "n": n})

    def _write(self, row: dict) -> None:
        if self.file is not None:
            self.file.write(json.dumps(row) + "\n")
            self.file.flush()  # a crash keeps every row written so far

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def describe_run(trainer) -> str:
    from minitx.core.model.transformer import parameter_breakdown

    m, t = trainer.model_cfg, trainer.cfg
    params = parameter_breakdown(trainer.model)["total"]
    bug = f" bug={t.bug}" if t.bug else ""
    # Two lines that each fit 80 columns: the model, then the run.
    return (
        f"{_training_what(trainer.task)}{m.norm}-norm d_model {m.d_model} "
        f"heads {m.n_heads} layers {m.n_encoder_layers}+{m.n_decoder_layers} · {params:,} params\n"
        f"steps {t.steps} · batch {t.batch_size} · lr {t.lr:g} {t.schedule}, warmup {t.warmup} · "
        f"{trainer.device.type}{bug}"
    )


def short_loss(value: float) -> str:
    """0.1523, or 3.1e-05 once four decimals would read 0.0000."""
    return f"{value:.4f}" if value >= 0.01 else f"{value:.1e}"
def _training_what(task) -> str:
    """'training reverse 4-10 · ', or a data file's summary on a line of its own (too long to
    share one with the model at 80 columns)."""
    what = task_summary(task)
    return f"training on {what}\n" if task.name == "data" else f"training {what} · "


def task_summary(task) -> str:
    """'reverse 4-10', 'dates', or 'pairs.tsv: 9,500 pairs (500 held out), 42 char tokens'."""
    if task.name == "data":
        c, file = task.counts, task.provenance["data"]["file"]
        return (f"{file}: {c['train']:,} pairs ({c['heldout']:,} held out), "
                f"{task.vocab.size - len(task.vocab.specials)} {task.vocab.level} tokens")
    return f"{task.name} {task.min_len}-{task.max_len}" if task.exact_lengths else task.name


def log_line(stats) -> str:
    line = (
        f"step {stats.step:>6}  loss {short_loss(stats.loss)}  grad {stats.grad_norm:.3f}  "
        f"lr {stats.lr:.2e}  {stats.examples_per_s:,.0f} ex/s"
    )
    if stats.accuracy is not None:
        line += f"  acc {stats.accuracy:.1%}"
    return line


WIDE = 100  # columns from which the bar also shows grad norm, lr and speed


class Reporter:
    """Progress for one run: a Rich bar on a terminal, plain lines otherwise, plus metrics."""

    def __init__(self, trainer, quiet: bool, log_every: int | None, metrics: str | None,
                 resume: bool) -> None:
        self.trainer = trainer
        self.quiet = quiet
        self.plain = log_every is not None or not sys.stdout.isatty()
        self.log_every = log_every or 100
        self.metrics = Metrics(metrics, resume=resume)
        self.progress = None
        self.start_step = trainer.step_count
        self.started = time.perf_counter()
        self.last_accuracy = trainer.last_accuracy

    def __enter__(self):
        if not self.quiet:
            click.echo(describe_run(self.trainer))
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
        self.metrics.write_step(stats)
        if stats.accuracy is not None:
            self.evaluated(stats.step, stats.accuracy)
        if self._logged(stats) and not self.quiet and self.plain:
            click.echo(log_line(stats))
        if self.progress is not None:
            self._advance(stats)

    def evaluated(self, step: int, accuracy: float) -> None:
        """An evaluation: the --metrics row (the Trainer's history has it already)."""
        self.metrics.write_eval(step, accuracy, self.trainer.cfg.eval_size)

    # -- the progress bar ------------------------------------------------------------------
    def _start_bar(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        from minitx.tui.cli.common import console

        out = console()
        # Step count, loss, accuracy and ETA must stay visible at 80 columns: the bar shrinks
        # first, and grad norm, lr and speed only join on a wide terminal.
        self.wide = out.width >= WIDE
        self.progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(bar_width=None if self.wide else 12),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeRemainingColumn(),
            console=out,
            transient=False,
        )
        self.task_id = self.progress.add_task(
            "train", total=self.trainer.cfg.steps, completed=self.trainer.step_count, info=""
        )
        self.progress.start()

    def _advance(self, stats) -> None:
        if stats.accuracy is not None:
            self.last_accuracy = stats.accuracy
        acc = f"  acc {self.last_accuracy:.1%}" if self.last_accuracy is not None else ""
        info = f"loss {short_loss(stats.loss)}{acc}"
        if self.wide:
            elapsed = time.perf_counter() - self.started
            speed = (stats.step - self.start_step) / elapsed if elapsed > 0 else 0.0
            info += f"  grad {stats.grad_norm:.2f}  lr {stats.lr:.1e}  {speed:.0f} steps/s"
        self.progress.update(self.task_id, completed=stats.step, info=info)
