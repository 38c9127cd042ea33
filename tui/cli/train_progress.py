"""What `minitx train` shows while it runs: a Rich progress bar on a terminal, plain log lines
otherwise (or with --log-every), and the --metrics file. The Reporter listens to the Trainer's
run (core/training/events.py)."""

from __future__ import annotations

import dataclasses
import json
from collections import deque
from pathlib import Path

from minitx.core.training.events import RunListener
from minitx.tui.render.model_text import output_text, printable
from minitx.tui.render.numbers import accuracy_text, rate, scores_change
from minitx.tui.render.text_fit import end_cut


class Metrics:
    """One JSON object per step ({"kind": "step", ...}) and one per evaluation ({"kind": "eval",
    "step", "accuracy", "n"}); appended to on resume so one file holds the whole run."""

    def __init__(self, path: str | None, resume: bool) -> None:
        self.file = open(path, "a" if resume else "w", encoding="utf-8") if path else None

    def write_step(self, stats) -> None:
        self._write({"kind": "step", **stats.to_dict()})

    def write_eval(self, step: int, result, watched=None, aer: float | None = None) -> None:
        """An evaluation: the examples it really measured, and whether it stopped early; a
        watched fine-tune's general_loss and kl_to_base at that step too (history.Watched), and
        a guided run's head's AER on held-out gold (`aer`)."""
        text = result.text  # a fine-tune's: its loss, BLEU and chrF too
        forgetting = {}
        if watched is not None and watched.steps and watched.steps[-1] == step:
            forgetting = {name: watched.series_of(name)[-1] for name in ("general_loss", "kl_to_base")
                          if watched.series_of(name)}
        self._write({"kind": "eval", "step": step, "accuracy": result.accuracy, "n": result.n,
                     "complete": result.complete,
                     **({"loss": result.loss} if result.loss is not None else {}),
                     **({"bleu": text.bleu, "chrf": text.chrf} if text is not None else {}), **forgetting,
                     **({"aer": aer} if aer is not None else {})})

    def write_base(self, result) -> None:
        """A fine-tune's base, at step 0: its held-out loss, BLEU and chrF (no accuracy: the
        exact-match curve starts at the first evaluation, as it always has)."""
        if result.text is not None and result.loss is not None:
            self._write({"kind": "eval", "step": 0, "loss": result.loss, "bleu": result.text.bleu,
                         "chrf": result.text.chrf})

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
    if t.init:
        return _fine_tune_what(trainer, params) + _watch_what(trainer)
    bug = f" bug={t.bug}" if t.bug else ""
    # Two lines that each fit 80 columns: the model, then the run.
    return (
        f"{_training_what(trainer.task)}{m.norm}-norm d_model {m.d_model} "
        f"heads {m.n_heads} layers {m.n_encoder_layers}+{m.n_decoder_layers} · {params:,} params\n"
        f"{_schedule_what(trainer)} · batch {t.batch_size} · {trainer.device.type}{bug}"
    )


def _fine_tune_what(trainer, params: int) -> str:
    """A fine-tune's header: its base and pairs, then its settings (the family's defaults
    under the options given): what it will do, each line within 80 columns. The family as a
    person calls it (NLLB-200, mBART-50), and a multilingual model's pair of languages."""
    from minitx.core.data.languages import current

    t, c = trainer.cfg, trainer.task.counts
    source, target = current(trainer.task)
    family = trainer.task.family_name() + (f" {source} → {target}" if source else "")
    file = trainer.task.provenance["data"]["file"]
    cut = f", {c['cut_too_long']:,} cut to fit" if c.get("cut_too_long") else ""
    optimiser = f"AdamW wd {t.weight_decay:g}" if t.optimizer == "adamw" else "Adafactor"
    split = f"batch {t.batch_size}" + (f" x {t.accumulate}" if t.accumulate > 1 else "") + \
        (f" x {trainer.processes.world} processes" if trainer.processes.distributed else "")
    return (f"fine-tuning {t.init} ({family}, {params:,} params, dropout "
            f"{trainer.model_cfg.dropout:g})\n"
            f"on {file}: {c['train']:,} pair{'s' * (c['train'] != 1)}{held_out(trainer.task, cut)}\n"
            f"{_schedule_what(trainer)} · {optimiser} · {split} · {trainer.device.type}"
            + (f" · label smoothing {t.label_smoothing:g}" if t.label_smoothing else "")
            + (_lora_what(trainer) if trainer.lora is not None else ""))


def _lora_what(trainer) -> str:
    """'LoRA rank 8, alpha 16 on q_proj, v_proj: 24 layers, 98,304 params trained', a line."""
    spec = trainer.lora
    trained = sum(p.numel() for p in trainer.trainable())
    layers = sum(1 for name, _ in trainer.model.named_modules() if name.endswith(".lora_A"))
    return (f"\nLoRA rank {spec.rank}, alpha {spec.alpha:g}"
            + (f", dropout {spec.dropout:g}" if spec.dropout else "")
            + f" on {', '.join(spec.targets)}: {layers} layers, {trained:,} params trained")


def _watch_what(trainer) -> str:
    """A watched fine-tune's last header line (within 80 columns): 'watching 3 probes ·
    forgetting on reverse.tsv (200 pairs, alarm +20%) · numerics'."""
    w = trainer.watcher
    if w is None:
        return ""
    from minitx.tui.cli.common import field_lines

    probes = f"watching {len(w.sources)} probe{'s' * (len(w.sources) != 1)}"
    if w.general:
        pairs = sum(len(batch) for batch in w.general)
        name = Path(trainer.cfg.general).name
        forgetting = f"forgetting on {name} ({pairs:,} pairs, alarm +{w.alarm_rise:.0%})"
    else:
        forgetting = "no --general: KL on the probes"
    return "\n" + field_lines([probes, forgetting, "numerics"], 80).plain


def _schedule_what(trainer) -> str:
    """'steps 900 · lr 0.003 cosine, warmup 50' for a new run; for a resumed one, the lr its
    steps will really use: 'steps 301-400 · lr 3e-05 to 3e-05 (cosine, resumed)'."""
    t, first = trainer.cfg, trainer.step_count + 1
    planned = f"lr {t.lr:g} {t.schedule}, warmup {t.warmup}"
    if first == 1:
        return f"steps {t.steps} · {planned}"
    if trainer.schedule_from == trainer.step_count:
        return f"steps {first}-{t.steps} · a new schedule: {planned}"
    start, end = trainer.lr_for(first), trainer.lr_for(t.steps)
    return f"steps {first}-{t.steps} · lr {start:.2g} to {end:.2g} ({t.schedule}, resumed)"


def short_loss(value: float) -> str:
    """0.1523, or 3.1e-05 once four decimals would read 0.0000."""
    return f"{value:.4f}" if value >= 0.01 else f"{value:.1e}"


def _training_what(task) -> str:
    """'training reverse 4-10 · ', or a data file's summary on a line of its own (too long to
    share one with the model at 80 columns)."""
    what = task_summary(task)
    return f"training on {what}\n" if task.name == "data" else f"training {what} · "


def held_out(task, cut: str = "") -> str:
    """' (500 held out)' of --data's pairs, or ' · held out: valid.tsv (200 pairs)' when the
    held-out pairs are --valid's (none of --data's then)."""
    count = task.counts["heldout"]
    if task.provenance.get("valid"):
        return f"{cut and ' (' + cut[2:] + ')'} · held out: {task.heldout_file()} ({count:,} pairs)"
    return f" ({count:,} held out{cut})"


def task_summary(task) -> str:
    """'reverse 4-10', 'dates', or 'pairs.tsv: 9,500 pairs (500 held out), 42 char tokens'."""
    if task.name == "data":
        c, file = task.counts, task.provenance["data"]["file"]
        return (f"{file}: {c['train']:,} pairs{held_out(task)}, "
                f"{task.vocab.size - len(task.vocab.specials)} {task.vocab.level} tokens")
    return f"{task.name} {task.min_len}-{task.max_len}" if task.exact_lengths else task.name


def fine_tune_scores(trainer) -> str | None:
    """'loss 5.21 -> 1.03 · BLEU 3.1 -> 25.4 · chrF 20.1 -> 48.2': a fine-tune's base
    against its weights now, on its held-out pairs; None for other runs."""
    return scores_change(trainer.base_scores, trainer.last_scores) if trainer.cfg.init else None


def watch_lines(trainer, width: int) -> list[str]:
    """A watched fine-tune's end: forgetting (base -> end, the KL to the base) and each probe's
    output beside the base's, the changed words in brackets."""
    from minitx.core.training.forgetting import loss_rise
    from minitx.core.training.watching import last_probes, marked
    from minitx.tui.cli.common import field_lines

    if trainer.watcher is None:
        return []
    lines = []
    f = trainer.watcher.forgetting_dict(trainer.history)
    if f["general_loss_end"] is not None:
        rise = loss_rise(f["general_loss_base"], f["general_loss_end"])
        fields = [f"forgetting: general-domain loss {f['general_loss_base']:.3g} -> "
                  f"{f['general_loss_end']:.3g} ({rise:+.0%})", f"KL to base {f['kl_to_base_end']:.3g}"]
        if f["alarm"]:
            fields.append(f"ALARM since step {f['alarm_step']}")
        lines += field_lines(fields, width).plain.splitlines()
    elif f["kl_to_base_end"] is not None:
        lines.append(f"KL to base on the probes {f['kl_to_base_end']:.3g} (no --general: change, not "
                     "forgetting)")
    for r in last_probes(trainer.history):
        lines.append(end_cut(f"probe {r.probe + 1}: {printable(r.source)}", width))
        lines.append(end_cut(f"  base: {output_text(r.base_output)}", width))
        lines.append(end_cut(f"  now:  {output_text(marked(r.output, r.changed))}", width))
    return lines


def aer_at(trainer, step: int) -> float | None:
    """A guided run's head's AER recorded at `step`, or None (an unguided run: always)."""
    if trainer.guide is None:
        return None
    steps, values = trainer.history.aer_steps, trainer.history.aer
    return values[-1] if steps and steps[-1] == step else None


def guided_json(trainer) -> dict:
    """`train --json`'s guided alignment: the head, the weight, the last step's guided loss and
    the head's AER on held-out gold at each evaluation (null where no gold was held out)."""
    steps, values = trainer.history.series("aer")
    return {"guided_alignment": {"head": trainer.guide.name, "weight": trainer.guide.weight,
                                 "guided_loss": trainer.last_guided_loss,
                                 "aer": {"step": steps, "value": values} if steps else None}}


def guided_line(trainer) -> str | None:
    """The guided head's latest AER as a progress line, or None before there is one."""
    steps, values = trainer.history.series("aer")
    if not steps:
        return None
    start = f" (from {values[0]:.1%} at step {steps[0]})" if len(steps) > 1 else ""
    return f"guided head {trainer.guide.name}: AER {values[-1]:.1%} at step {steps[-1]}{start}"


def log_line(stats, until: float = 0.0, scores: dict | None = None) -> str:
    """A plain progress line; on an evaluation step its exact match, and the BLEU of `scores`
    where the evaluation decoded text (a fine-tune's, --eval-bleu's)."""
    line = (
        f"step {stats.step:>6}  loss {short_loss(stats.loss)}  grad {stats.grad_norm:.3f}  "
        f"lr {stats.lr:.2e}  {rate(stats.examples_per_s)} ex/s"
    )
    if stats.accuracy is not None:
        line += "  " + accuracy_text(stats.accuracy, stats.eval_n or 0, stats.eval_complete, until)
        if scores and scores.get("bleu") is not None:
            line += f"  BLEU {scores['bleu']:.1f}"
    return line


SPEED_STEPS = 20  # steps the ex/s of a log line is the mean of
WIDE = 100  # columns from which the bar also shows grad norm, lr and speed


class Reporter(RunListener):
    """Progress for one run: a Rich bar on a terminal, plain lines otherwise, plus metrics; all of
    it written to `out` (tui/cli/output.py), which goes quiet if its reader goes away."""

    def __init__(self, trainer, out, quiet: bool, log_every: int | None, metrics: str | None,
                 resume: bool) -> None:
        self.trainer, self.out = trainer, out
        self.quiet = quiet
        self.plain = log_every is not None or not out.isatty()
        self.log_every = log_every or 100
        self.metrics = Metrics(metrics, resume=resume)
        self.progress = None
        self._evaluated = None  # an evaluation whose step's row is not written yet
        self._speed: deque = deque(maxlen=SPEED_STEPS)  # (pairs, seconds) of the latest steps
        self.start_step = trainer.step_count
        self.last_accuracy = "" if trainer.last_accuracy is None else f"acc {trainer.last_accuracy:.1%}"

    def __enter__(self):
        if not self.quiet:
            self.out.write(describe_run(self.trainer) + "\n")
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

    def on_step(self, trainer, stats) -> None:
        self.metrics.write_step(stats)
        if self._evaluated is not None:  # after its step's row: a step row drops later evaluations
            self.metrics.write_eval(stats.step, self._evaluated, trainer.history.watched,
                                    aer_at(trainer, stats.step))
            self._evaluated = None
        # ex/s over the last SPEED_STEPS steps: one step's own swings with its batch's lengths
        self._speed.append((trainer.step_rows, trainer.step_rows / max(stats.examples_per_s, 1e-9)))
        if self._logged(stats) and not self.quiet and self.plain:
            rows, seconds = (sum(part) for part in zip(*self._speed))
            smoothed = dataclasses.replace(stats, examples_per_s=rows / seconds if seconds else 0.0)
            self.out.write(log_line(smoothed, trainer.cfg.until, trainer.last_scores) + "\n")
        if self.progress is not None:
            self._advance(stats)

    def on_evaluating(self, trainer, what: str) -> None:
        """A fine-tune's evaluation decodes its held-out pairs greedily (seconds to minutes on a
        large model): a line says what it measures, above the bar or among the plain lines."""
        if self.quiet or not trainer.cfg.init:
            return
        line = f"evaluating {what} (greedy decoding)…"
        if self.progress is not None:  # in the bar's place until the next step
            self.progress.update(self.task_id, info=line)
        else:
            self.out.write(line + "\n")

    def on_base_evaluation(self, trainer, result) -> None:
        self.metrics.write_base(result)

    def on_evaluation(self, trainer, result) -> None:
        """An evaluation in the run (its --metrics row follows its step's); the Trainer's history
        has it already."""
        self._evaluated = result
        self.last_accuracy = accuracy_text(result.accuracy, result.n, result.complete, trainer.cfg.until)
        if trainer.guide is not None and not self.quiet and (line := guided_line(trainer)):
            self.say(line)
        forgetting = trainer.watcher.forgetting if trainer.watcher is not None else None
        if forgetting is not None and forgetting.alarm_step == trainer.step_count and not self.quiet:
            self.say(forgetting.line())

    def say(self, line: str) -> None:
        """A line between the progress lines (above the bar on a terminal)."""
        if self.progress is not None:
            self.progress.console.print(line, markup=False, highlight=False)
        else:
            self.out.write(line + "\n")

    def evaluated_after(self, trainer, result) -> None:
        """The evaluation after the run ended, when its last step had none."""
        self.metrics.write_eval(trainer.step_count, result, trainer.history.watched,
                                aer_at(trainer, trainer.step_count))

    # -- the progress bar ------------------------------------------------------------------
    def _start_bar(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        from minitx.tui.cli.common import console

        out = console(self.out)
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
        acc = f"  {self.last_accuracy}" if self.last_accuracy else ""
        info = f"loss {short_loss(stats.loss)}{acc}"
        if self.wide:
            speed = rate(self.trainer.steps_per_s)
            info += f"  grad {stats.grad_norm:.2f}  lr {stats.lr:.1e}  {speed} steps/s"
        self.progress.update(self.task_id, completed=stats.step, info=info)


class SaveEvery(RunListener):
    """--save-every N: a resumable checkpoint every N steps (not at the last: the end saves)."""

    def __init__(self, path, every: int) -> None:
        self.path, self.every = path, every

    def on_step(self, trainer, stats) -> None:
        if stats.step % self.every == 0 and stats.step < trainer.cfg.steps:
            trainer.save(self.path, resumable=True)
