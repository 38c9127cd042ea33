"""One training run of the Train screen, as the screen's thread worker runs it.

The run owns the Trainer. Between two steps it looks for requests from the UI thread (pause,
stop, save, the app closing) and at most ten times a second posts a Progress message; it never
touches a widget. Nothing here imports torch at module level.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from textual.message import Message

from minitx.tui.app.messages import Progress, RunEnded, RunStarted, Saved
from minitx.tui.render.numbers import short_count

POST_INTERVAL = 0.1  # seconds between Progress messages: at most 10 a second
PROBE_INTERVAL = 1.0  # seconds between probe refreshes (two small forward passes), at least
PROBE_SHARE = 0.05  # and at most this share of the worker's time: a big model's probe is slow


def run_name(train_cfg) -> str:
    """What a run is called: its task, or its data file's name (the task is then "data")."""
    return Path(train_cfg.data).stem if train_cfg.data else train_cfg.task


def save(trainer, path: str) -> Saved:
    """A resumable checkpoint; a failure is the message's error, never an exception."""
    from minitx.core.checkpoint import CheckpointError

    try:
        return Saved(str(Path(trainer.save(path, resumable=True)).resolve()))
    except CheckpointError as e:
        return Saved(error=str(e))
    except Exception as e:  # noqa: BLE001 - a message, never a traceback
        return Saved(error=f"save failed: {type(e).__name__}: {e}")


def run_path(folder: str | Path, task: str, number: int) -> Path:
    return Path(folder) / f"minitx-{task}-run{number}.safetensors"


def next_run_number(folder: str | Path, task: str, after: int) -> int:
    """The first run number above `after` whose file does not exist yet: a new session's run 1
    never overwrites an earlier session's."""
    number = after + 1
    while run_path(folder, task, number).exists():
        number += 1
    return number


class TrainingRun:
    """One run: its number, where `w` saves it, and the state it shares between the UI thread
    and its worker (a few Events and one pending save request). `post` delivers a message to
    the screen (thread-safe)."""

    def __init__(self, number: int, model_cfg, train_cfg, path: Path, post: Callable[[Message], None],
                 resume_from: str | None = None) -> None:
        self.number, self.model_cfg, self.train_cfg, self.path = number, model_cfg, train_cfg, path
        self.post, self.resume_from = post, resume_from
        self.name = f"run {number} · {'resumed ' if resume_from else ''}{run_name(train_cfg)}"
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

    def train(self, cancelled: Callable[[], bool]) -> None:
        """The worker's whole job: build the Trainer, step until done, stopped or cancelled."""
        try:
            self._train(cancelled)
        finally:
            self.halted.set()

    def _train(self, cancelled: Callable[[], bool]) -> None:
        from minitx.core.model.transformer import parameter_breakdown
        from minitx.core.training.threads import set_threads
        from minitx.core.training.trainer import Trainer
        from minitx.tui.app.loaded import describe_model

        # minitx's default leaves a core to the UI thread: torch's threads on every core starve
        # the terminal (measured on 2 cores: keys lagged, steps ran 3x slower on 2 threads).
        set_threads()
        model_cfg, train_cfg = self.model_cfg, self.train_cfg
        trainer = Trainer.resume(self.resume_from, train_cfg) if self.resume_from \
            else Trainer(model_cfg, train_cfg)
        self.first_step = trainer.step_count
        self.trainer = trainer
        params = parameter_breakdown(trainer.model)["total"]
        self.post(RunStarted(f"{self.name} · {trainer.model_cfg.norm}-norm · "
                             f"{short_count(params)} params · {trainer.device.type}"))
        pending: list[float] = []
        accuracy = None
        last_post = last_probe = 0.0
        probe_interval = PROBE_INTERVAL
        started, first_step = time.monotonic(), trainer.step_count
        paused_for = 0.0
        stats = posted = None
        while not trainer.done:
            self._save_if_asked(trainer)  # before the cancel check: quitting keeps a save
            if cancelled():
                return  # the app is closing: nothing more to say
            if self.stop.is_set():
                break
            if self.paused.is_set():
                time.sleep(0.05)
                paused_for += 0.05
                continue
            stats = trainer.train_step()
            pending.append(stats.loss)
            accuracy = stats.accuracy if stats.accuracy is not None else accuracy
            now = time.monotonic()
            if now - last_post < POST_INTERVAL and not trainer.done:
                continue
            probe = None
            if now - last_probe >= probe_interval or trainer.done:
                probe, last_probe = self.probe(trainer), time.monotonic()
                # measured: a 48-head model's probe after every 1 s step held the app's
                # training to 60% of headless
                probe_interval = max(PROBE_INTERVAL, (last_probe - now) / PROBE_SHARE)
            elapsed = max(1e-6, now - started - paused_for)
            rate = (stats.step - first_step) / elapsed
            posted = Progress(
                stats.step, train_cfg.steps, pending, stats.loss, stats.grad_norm, stats.lr, rate,
                (train_cfg.steps - stats.step) / max(rate, 1e-6), accuracy, probe)
            self.post(posted)
            pending, last_post = [], time.monotonic()
        if stats is not None and (posted is None or posted.step != stats.step):
            # The steps since the last message, so the screen ends on the step the run ended on.
            self.post(Progress(stats.step, train_cfg.steps, pending, stats.loss, stats.grad_norm,
                               stats.lr, posted.steps_per_s if posted else 0.0, 0.0, accuracy))
        self.halted.set()
        self._save_if_asked(trainer)
        record = describe_model(trainer.model, trainer.task, f"{self.name} · step {trainer.step_count}",
                                train_config=trainer.cfg, steps=trainer.step_count,
                                history=trainer.history)
        self.post(RunEnded(trainer.step_count, self.stop.is_set(), record))

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
    def probe(trainer) -> dict:
        """The live picture: alignment of every head, and the best head's grid on a probe."""
        from minitx.core.interp.alignment import best_head, head_scores
        from minitx.core.training.probe import probe

        task = trainer.task
        measure, scores = head_scores(trainer.model, task, n=32)  # alignment, or sharpness
        scores = scores.tolist()
        best = best_head(scores)
        # the source the run's history snapshots (the form's probe, or the task's own example)
        result = probe(trainer.model, task, trainer.probe_batch)
        return {"rows": result.cross_attention[best[0], best[1]].tolist(),
                "targets": task.vocab.labels(result.target),
                "source": task.vocab.labels(result.src), "scores": scores, "best": best,
                "measure": measure, "source_text": task.format(result.src)}
