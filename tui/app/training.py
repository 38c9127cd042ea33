"""One training run of the Train screen, as the screen's thread worker runs it.

The run owns the Trainer and listens to its run (a core.training.events.RunListener):
before each step it takes requests from the UI thread (pause, stop, save, the app closing), and
after steps it posts a Progress message at most ten times a second; it never touches a widget.
Nothing here imports torch at module level (core's events import nothing heavy); a hook it does
not define (a fine-tune's base evaluation) is RunListener's, which does nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from textual.message import Message

from minitx.core.training.events import RunListener
from minitx.core.training.run_files import run_name
from minitx.core.wording import counted
from minitx.tui.app.errors import error_text
from minitx.tui.app.messages import LiveProbe, ProbeLine, Progress, RunEnded, RunStarted, Saved, Watching
from minitx.tui.render.numbers import accuracy_text, scores_change, short_count

POST_INTERVAL = 0.1  # seconds between Progress messages: at most 10 a second
PROBE_INTERVAL = 1.0  # seconds between probe refreshes (two small forward passes), at least
PROBE_SHARE = 0.05  # and at most this share of the worker's time: a big model's probe is slow


def save(trainer, path: str) -> Saved:
    """A resumable checkpoint; a failure is the message's error, never an exception."""
    from minitx.core.checkpoint import CheckpointError

    try:
        return Saved(str(Path(trainer.save(path, resumable=True)).resolve()))
    except CheckpointError as e:
        return Saved(error=str(e))
    except Exception as e:  # noqa: BLE001 - a message, never a traceback
        return Saved(error=f"save failed: {error_text(e)}")


ACTIVE = ("running", "paused", "stopping")  # a worker is stepping (or about to stop)
ENDED = ("finished", "stopped")  # a run's model is there to explore, save or continue


class TrainingRun(RunListener):
    """One run: its number, where `w` saves it, and the state it shares between the UI thread
    and its worker (a few Events and one pending save request). `post` delivers a message to
    the screen (thread-safe)."""

    def __init__(self, number: int, model_cfg, train_cfg, path: Path, post: Callable[[Message], None],
                 resume_from: str | None = None, base=None) -> None:
        self.number, self.model_cfg, self.train_cfg, self.path = number, model_cfg, train_cfg, path
        self.post, self.resume_from = post, resume_from
        self.base = base  # a fine-tune's model on screen (LoadedModel): what it starts from
        name = run_name(train_cfg.task, train_cfg.data)
        kind = "resumed " if resume_from else "fine-tune " if train_cfg.init else ""
        self.name = f"run {number} · {kind}{name}"
        self.trainer = None  # set by the worker; read only when no step is running
        self.first_step = 0  # where it started (a resumed run: the saved step)
        self.saved_step: int | None = None  # the step the last save wrote
        self.paused = threading.Event()
        self.stop = threading.Event()
        self.halted = threading.Event()  # set once the worker takes no more steps
        self.save_to: str | None = None  # a save request the worker handles between steps

    @property
    def unsaved_steps(self) -> int:
        """Steps a quit (or a new run) would throw away."""
        if self.trainer is None:
            return 0
        return self.trainer.step_count - max(self.first_step, self.saved_step or 0)

    @property
    def unsaved(self) -> str:
        """'run-3 has 12 steps not saved': what a question that would drop the run says of it."""
        return f"{self.name} has {counted(self.unsaved_steps, 'step')} not saved"

    def train(self, cancelled: Callable[[], bool]) -> None:
        """The worker's whole job: build the Trainer, run it until done, stopped or cancelled."""
        try:
            self._train(cancelled)
        finally:
            self.halted.set()

    def _train(self, cancelled: Callable[[], bool]) -> None:
        from minitx import checkpoints
        from minitx.core.model import lora
        from minitx.core.model.transformer import parameter_breakdown
        from minitx.core.training.threads import set_threads
        from minitx.core.training.trainer import Trainer
        from minitx.tui.app.loaded import as_checkpoint, describe_model

        # minitx's default leaves a core to the UI thread: torch's threads on every core starve
        # the terminal (docs/performance.md).
        set_threads()
        if self.resume_from:  # a fine-tune's file holds its own weights and tokenisers
            trainer = Trainer.resume(self.resume_from, self.train_cfg, watch_base=self.watch_base(),
                                     open_base=checkpoints.open_base)
        elif self.train_cfg.init:  # the base's weights are copied: the model on screen stays as it is
            trainer = Trainer(self.model_cfg, self.train_cfg, base=as_checkpoint(self.base))
        else:
            trainer = Trainer(self.model_cfg, self.train_cfg)
        self.first_step = trainer.step_count
        self.trainer = trainer
        params = parameter_breakdown(trainer.model)["total"]
        self.post(RunStarted(f"{self.name} · {trainer.model_cfg.norm}-norm · "
                             f"{short_count(params)} params · {trainer.device.type}"))
        self._cancelled, self._pending, self._accuracy, self._scores = cancelled, [], None, (None, None)
        self._last_post = self._last_probe = 0.0
        self._probe_interval, self._posted = PROBE_INTERVAL, None
        trainer.run(self)
        if cancelled():
            return  # the app is closing: nothing more to say
        if self._stats is not None and (self._posted is None or self._posted.step != self._stats.step):
            self._post_progress(trainer, self._stats, probe=None)  # end on the step the run ended on
        self.halted.set()
        self._save_if_asked(trainer)
        # a bf16 LoRA run's base back in float32 (a new fine-tune's: the base's own weights, still
        # on screen): Explore runs it without the run's autocast
        started_from = self.base.model if self.base is not None and not self.resume_from else None
        lora.base_in_float32(trainer.model, started_from)
        record = describe_model(trainer.model, trainer.task, f"{self.name} · step {trainer.step_count}",
                                train_config=trainer.cfg, steps=trainer.step_count,
                                history=trainer.history)
        self.post(RunEnded(trainer.step_count, self.stop.is_set(), record))

    def watch_base(self):
        """A resumed fine-tune's base, to go on watching against: its init model where that still
        opens with the weights the file records; None (not watched) otherwise or for other runs."""
        from minitx import checkpoints
        from minitx.core.training.fine_tune import is_recorded_base

        train = self.train_cfg
        if not (train.init and train.watch):
            return None
        try:
            saved, base = checkpoints.load(self.resume_from), checkpoints.load(train.init)
        except Exception:  # noqa: BLE001 - gone or changed: the run goes on unwatched, as the CLI's
            return None
        return base.model if is_recorded_base(saved, base.model) else None

    # -- what the trainer's run tells (RunListener's hooks) ------------------------------------
    _stats = None  # the last step's StepStats

    def stop_requested(self, trainer) -> bool:
        """Before each step: a save asked for, the app closing, stop; a pause waits here."""
        while True:
            self._save_if_asked(trainer)  # before the cancel check: quitting keeps a save
            if self._cancelled() or self.stop.is_set():
                return True
            if not self.paused.is_set():
                return False
            time.sleep(0.05)

    def on_step(self, trainer, stats) -> None:
        self._stats = stats
        self._pending.append(stats.loss)
        if stats.accuracy is not None:  # as the command line's progress says it
            self._accuracy = accuracy_text(stats.accuracy, stats.eval_n or 0, stats.eval_complete,
                                           trainer.cfg.until, short=True)
            # a fine-tune's held-out BLEU and chrF, its base's before them (core measured both)
            if trainer.cfg.init:
                base, now = trainer.base_scores, trainer.last_scores
                self._scores = (scores_change(base, now, True, ("bleu", "chrf")),
                                scores_change(base, now, True, ("loss",)))
        now = time.monotonic()
        if now - self._last_post < POST_INTERVAL and not trainer.done:
            return
        probe = None
        if now - self._last_probe >= self._probe_interval or trainer.done:
            probe, self._last_probe = self.probe(trainer), time.monotonic()
            # a big model's probe is slow: it may take at most PROBE_SHARE of the worker's time
            self._probe_interval = max(PROBE_INTERVAL, (self._last_probe - now) / PROBE_SHARE)
        self._post_progress(trainer, stats, probe)

    def on_evaluation(self, trainer, result) -> None:
        """The step that ran it carries its accuracy; a watched fine-tune's probes and forgetting
        (what core recorded in the history at this evaluation) go to the screen now."""
        watched = trainer.history.watched
        if watched is None or not watched.steps or watched.steps[-1] != trainer.step_count:
            return
        from minitx.core.training.watching import last_probes

        step = watched.steps[-1]
        probes = [ProbeLine(r.source, r.output, r.base_output, list(r.changed))
                  for r in last_probes(trainer.history) if r.step == step]  # none if not probed now
        forgetting = trainer.watcher.forgetting if trainer.watcher is not None else None
        self.post(Watching(
            step, probes, watched.kl_to_base[-1] if watched.kl_to_base else None, watched.kl_on,
            (forgetting.general_loss_base, forgetting.general_loss_end)
            if forgetting is not None and forgetting.general_loss_end is not None else None,
            forgetting.line() if forgetting is not None and forgetting.alarm else None))

    def on_evaluating(self, trainer, what: str) -> None:
        pass  # the stats line's ETA holds the evaluations; the probes and scores come after it

    def on_snapshot(self, trainer, step: int) -> None:
        pass  # the history holds it; the timeline reads it once the run ends

    def on_save(self, trainer, path, resumable: bool) -> None:
        pass  # save_now() reports it, on whichever thread saved

    def _post_progress(self, trainer, stats, probe) -> None:
        rate = trainer.steps_per_s
        self._posted = Progress(
            stats.step, trainer.cfg.steps, self._pending, stats.loss, stats.grad_norm, stats.lr, rate,
            (trainer.cfg.steps - stats.step) / max(rate, 1e-6), self._accuracy, probe, *self._scores)
        self.post(self._posted)
        self._pending, self._last_post = [], time.monotonic()

    def _save_if_asked(self, trainer) -> None:
        if self.save_to is not None:
            path, self.save_to = self.save_to, None
            self.post(self.save_now(trainer, path))

    def save_now(self, trainer, path: str) -> Saved:
        """Save (on whichever thread no step is running) and remember the step it holds."""
        step = trainer.step_count
        saved = save(trainer, path)
        if not saved.error:
            self.saved_step = step
        return saved

    @staticmethod
    def probe(trainer) -> LiveProbe:
        """The live picture: alignment of every head, and the best head's grid on a probe."""
        from minitx.core.interp.alignment import best_head, head_scores
        from minitx.core.training.probe import probe

        task = trainer.task
        with trainer.precision():  # as the run computes (bf16 autocast)
            measure, scores = head_scores(trainer.model, task, n=32)  # alignment, or sharpness
            # the source the run's history snapshots (the form's probe, or the task's own example)
            result = probe(trainer.model, task, trainer.probe_batch)
        scores = scores.tolist()
        best = best_head(scores)
        return LiveProbe(rows=result.cross_attention[best[0], best[1]].tolist(),
                         targets=task.vocab.labels(result.target), source=task.source_labels(result.src),
                         source_text=task.format_source(result.src), scores=scores, best=best,
                         measure=measure)
