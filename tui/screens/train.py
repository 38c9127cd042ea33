"""Train: a form for the main hyperparameters, then a live run you can pause, stop and save.

The run lives in a thread worker that owns the Trainer. It checks for cancellation and for
requests (pause, stop, save) between steps, posts at most ten Progress messages a second and
never touches a widget; this screen only turns those messages into pixels.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input, Label, Select, Sparkline, Static
from textual.worker import Worker, WorkerState, get_current_worker

from minitx.tui.screens.shared import (
    ModelLoaded,
    TitleBar,
    best_head,
    describe_model,
    one_line_errors,
    short_count,
)
from minitx.tui.widgets.attention import AttentionGrid, ScoreTable
from minitx.tui.widgets.keybar import KeyBar

POST_INTERVAL = 0.1  # seconds between Progress messages: at most 10 a second
PROBE_INTERVAL = 1.0  # seconds between probe refreshes (two small forward passes)
PROBE_SOURCE = [7, 2, 9, 0, 4, 6]

# form field id -> label; the choices of the selects come from core once torch is loaded
FIELDS = {
    "task": "task", "steps": "steps", "batch": "batch", "lr": "lr",
    "warmup": "warmup", "dropout": "dropout", "d_model": "d_model", "heads": "heads",
    "layers": "layers", "norm": "norm", "seed": "seed", "device": "device",
}
SELECTS = ("task", "norm", "device")
INTS = ("steps", "batch", "warmup", "d_model", "heads", "layers", "seed")
# core's field names (in its "field: message" errors) -> the form field that sets them
CORE_FIELD = {"batch_size": "batch", "n_heads": "heads", "n_encoder_layers": "layers",
              "n_decoder_layers": "layers", "d_ff": "d_model"}


def _loss(value: float) -> str:
    """0.152, or 3.1e-05 once three decimals would read 0.000."""
    return f"{value:.3f}" if value >= 0.01 else f"{value:.1e}"


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class FormError(ValueError):
    def __init__(self, field_id: str, message: str) -> None:
        super().__init__(f"{field_id}: {message}")
        self.field_id, self.message = field_id, message


def build_configs(values: dict[str, Any], recipe) -> tuple[Any, Any]:
    """Form values (text) -> (ModelConfig, TrainConfig) from the recipe; FormError names the
    field to blame. Validation itself is core's: its ValueError says "field: message"."""
    parsed: dict[str, Any] = {}
    for key, text in values.items():
        if key in SELECTS:
            parsed[key] = text
            continue
        try:
            parsed[key] = int(text) if key in INTS else float(text)
        except (TypeError, ValueError):
            kind = "a whole number" if key in INTS else "a number"
            raise FormError(key, f"must be {kind}, got {text!r}") from None
    base = recipe
    try:
        model_cfg = base.model.replace(
            d_model=parsed["d_model"], n_heads=parsed["heads"], n_encoder_layers=parsed["layers"],
            n_decoder_layers=parsed["layers"], dropout=parsed["dropout"], norm=parsed["norm"],
            activation="",  # the norm's own default (post: relu, pre: gelu)
            d_ff=max(1, base.model.d_ff * parsed["d_model"] // base.model.d_model))
        train_cfg = base.train.replace(
            task=parsed["task"], steps=parsed["steps"], batch_size=parsed["batch"],
            lr=parsed["lr"], warmup=parsed["warmup"], seed=parsed["seed"], device=parsed["device"])
    except ValueError as e:
        name, _, message = str(e).partition(": ")
        raise FormError(CORE_FIELD.get(name, name), message or str(e)) from None
    return model_cfg, train_cfg


@dataclass
class Progress(Message):
    """Posted by the worker: every loss since the last message and the latest numbers."""

    step: int
    total: int
    losses: list[float]
    loss: float
    grad_norm: float
    lr: float
    steps_per_s: float
    eta_s: float
    accuracy: float | None
    probe: dict | None = None  # rows, targets, source, scores, best (layer, head)


@dataclass
class RunStarted(Message):
    summary: str


@dataclass
class RunEnded(Message):
    step: int
    stopped: bool
    record: Any = None  # LoadedModel of the trained model


@dataclass
class Saved(Message):
    path: str = ""
    error: str = ""
    extra: dict = field(default_factory=dict)


RUN_KEYS = ("space", "x", "w")  # never part of a form value, so they drive the run anywhere


class FormInput(Input):
    BINDINGS = [Binding("escape", "screen.leave_form", "leave form")]

    def check_consume_key(self, key: str, character: str | None) -> bool:
        # An Input claims every printable key, which hides even priority bindings.
        return key not in RUN_KEYS and super().check_consume_key(key, character)


class TrainScreen(Screen):
    AUTO_FOCUS = ""  # the run keys work at once; Tab moves into the form
    # Priority, and not consumed by FormInput: they work even while typing in the form.
    BINDINGS = [
        Binding("space", "toggle", "start/pause", priority=True),
        Binding("x", "stop", "stop", priority=True),
        Binding("w", "save", "save", priority=True),
        Binding("e", "app.switch_mode('explore')", "explore"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.recipe = None  # core.config.Recipe the form starts from
        self.form_error = ""  # the form's first problem, "field: message"
        # loading | idle | running | paused | stopping | stopped | finished | failed
        self.state = "loading"
        self.trainer = None  # set by the worker; read only when no step is running
        self.losses: list[float] = []
        self.last: Progress | None = None
        self.progress_messages = 0  # how many Progress messages this run (throttle check)
        self._paused = threading.Event()
        self._stop = threading.Event()
        self._save_to: str | None = None  # a save request the worker handles between steps

    def compose(self) -> ComposeResult:
        yield TitleBar("Train")
        with Grid(id="form"):
            for key, label in FIELDS.items():
                with Horizontal(classes="field"):
                    yield Label(label, classes="field-label")
                    if key in SELECTS:
                        yield Select([], id=key, compact=True, allow_blank=True)
                    else:
                        yield FormInput(id=key, compact=True)
        yield Static("", id="form-error", markup=False)
        with Vertical(id="loss-panel"):
            yield Sparkline([], id="loss-spark", summary_function=lambda xs: sum(xs) / len(xs))
            yield Label("", id="loss-range")
        yield Static("press space to start training", id="stats", markup=False)
        with Horizontal(id="probe-row"):
            with Vertical(id="probe-panel"):
                yield AttentionGrid(id="probe")
            with Vertical(id="probe-scores-panel"):
                yield ScoreTable(id="probe-scores")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#loss-panel").border_title = "loss"
        self.query_one("#probe-panel").border_title = "probe · cross-attention of the best head"
        self.query_one("#probe-scores-panel").border_title = "alignment, live"
        self.query_one("#form").disabled = True
        self.query_one("#probe", AttentionGrid).show(
            [], [], [], hint="the best head on a probe source, live")
        self.app.model_changed.subscribe(self, self._model_changed)
        self._model_changed(self.app)
        self.load_defaults()

    def _model_changed(self, app) -> None:
        if self.state in ("running", "paused", "stopping"):
            return  # the title names the run
        explored = f"Explore uses {app.current.name}" if app.current else app.status
        recipe = f"recipe {self.recipe.name} · " if self.recipe else ""
        self.query_one(TitleBar).set_info(f"new run: {recipe}{explored}")

    # -- the form ----------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="defaults", exit_on_error=False)
    def load_defaults(self) -> None:
        from minitx.core.config import DEFAULT_RECIPE, DEVICES, NORMS, recipe
        from minitx.core.tasks import TASKS

        chosen = recipe(DEFAULT_RECIPE)
        self.app.call_from_thread(self._fill_form, chosen, list(TASKS), list(NORMS), list(DEVICES))

    def _fill_form(self, chosen, tasks, norms, devices) -> None:
        self.recipe = chosen
        m, t = chosen.model, chosen.train
        values = {"steps": t.steps, "batch": t.batch_size, "lr": t.lr, "warmup": t.warmup,
                  "dropout": m.dropout, "d_model": m.d_model, "heads": m.n_heads,
                  "layers": m.n_decoder_layers, "seed": t.seed}
        for key, value in values.items():
            text = f"{value:g}" if isinstance(value, float) else str(value)
            self.query_one(f"#{key}", Input).value = text
        for key, options, value in (("task", tasks, t.task), ("norm", norms, m.norm),
                                    ("device", devices, t.device)):
            select = self.query_one(f"#{key}", Select)
            select.set_options([(o, o) for o in options])
            select.value = value
        self.query_one("#form").disabled = False
        self.state = "idle"
        self.validate_form()
        self._model_changed(self.app)

    def form_values(self) -> dict[str, Any]:
        values = {}
        for key in FIELDS:
            widget = self.query_one(f"#{key}")
            values[key] = widget.value if isinstance(widget, Input) else \
                (None if widget.value is Select.BLANK else widget.value)
        return values

    def validate_form(self):
        """Inline validation: the first problem under the form, its field marked."""
        if self.recipe is None:
            return None
        for key in FIELDS:
            self.query_one(f"#{key}").remove_class("-invalid")
        try:
            configs = build_configs(self.form_values(), self.recipe)
        except FormError as e:
            if e.field_id in FIELDS:
                self.query_one(f"#{e.field_id}").add_class("-invalid")
            self.form_error = f"{e.field_id}: {e.message}"
        else:
            self.form_error = ""
        message = f"✗ {self.form_error}" if self.form_error else ""
        self.query_one("#form-error", Static).update(message)
        return None if self.form_error else configs

    def on_input_changed(self, event: Input.Changed) -> None:
        self.validate_form()

    def on_select_changed(self, event: Select.Changed) -> None:
        self.validate_form()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_toggle()

    def action_leave_form(self) -> None:
        self.set_focus(None)

    # -- run control -------------------------------------------------------------------------
    @one_line_errors
    def action_toggle(self) -> None:
        if self.state == "running":
            self._paused.set()
            self._set_state("paused")
        elif self.state == "paused":
            self._paused.clear()
            self._set_state("running")
        elif self.state in ("idle", "finished", "stopped", "failed"):
            self.start()

    def start(self) -> None:
        configs = self.validate_form()
        if configs is None:
            self.notify(f"fix the form first: {self.form_error}", severity="warning", markup=False)
            return
        self.losses, self.last, self.progress_messages = [], None, 0
        self._paused.clear()
        self._stop.clear()
        self._save_to = None
        self.query_one("#loss-spark", Sparkline).data = []
        self._set_state("running")
        self.set_focus(None)
        self.run_training(*configs)

    def action_stop(self) -> None:
        if self.state in ("running", "paused"):
            self._stop.set()
            self._paused.clear()
            self._set_state("stopping")

    @one_line_errors
    def action_save(self) -> None:
        if self.trainer is None:
            self.notify("nothing to save yet: train a model first", severity="warning")
            return
        path = str(Path(self.app.save_dir) / f"minitx-{self.trainer.task.name}-"
                   f"step{self.trainer.step_count}.safetensors")
        if self.state in ("running", "paused", "stopping"):
            self._save_to = path  # the worker saves between two steps
        else:
            self.save_now(path)

    def save_now(self, path: str) -> None:
        # Synchronously, on the UI thread: no run is in progress, a minitx checkpoint writes in
        # tens of milliseconds, and a save that has returned cannot be lost by quitting next
        # (a worker or thread left a race with the app's exit).
        try:
            saved = self._save(self.trainer, path)
        except Exception as e:  # noqa: BLE001 - a message, never a traceback
            saved = Saved(error=f"save failed: {type(e).__name__}: {e}")
        self.on_saved(saved)

    @staticmethod
    def _save(trainer, path: str) -> Saved:
        from minitx.core.checkpoint import CheckpointError

        try:
            return Saved(str(Path(trainer.save(path)).resolve()))
        except CheckpointError as e:
            return Saved(error=str(e))

    def _set_state(self, state: str) -> None:
        self.state = state
        self.query_one("#form").disabled = state in ("running", "paused", "stopping", "loading")
        self._draw_stats()

    # -- the worker --------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="train", exit_on_error=False)
    def run_training(self, model_cfg, train_cfg) -> None:
        import torch

        from minitx.core.model import parameter_breakdown
        from minitx.core.train import Trainer

        # Leave one core to the UI thread: torch's intra-op threads spin on every core they
        # are given, and on a small or busy machine that starves the terminal (measured on 2
        # cores: keys lagged and steps ran 3x slower with 2 threads than with 1).
        torch.set_num_threads(max(1, _cores() - 1))
        worker = get_current_worker()
        trainer = Trainer(model_cfg, train_cfg)
        self.trainer = trainer
        params = parameter_breakdown(trainer.model)["total"]
        self.post_message(RunStarted(
            f"training {train_cfg.task} · {model_cfg.norm}-norm · {short_count(params)} params"
            f" · {trainer.device.type}"))
        pending: list[float] = []
        accuracy = None
        last_post = last_probe = 0.0
        started, first_step = time.monotonic(), trainer.step_count
        paused_for = 0.0
        while not trainer.done:
            if self._save_to is not None:  # before the cancel check: quitting keeps a save
                path, self._save_to = self._save_to, None
                self.post_message(self._save(trainer, path))
            if worker.is_cancelled:
                return  # the app is closing: nothing more to say
            if self._stop.is_set():
                break
            if self._paused.is_set():
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
            if now - last_probe >= PROBE_INTERVAL or trainer.done:
                probe, last_probe = self._probe(trainer), now
            elapsed = max(1e-6, now - started - paused_for)
            rate = (stats.step - first_step) / elapsed
            self.post_message(Progress(
                stats.step, train_cfg.steps, pending, stats.loss, stats.grad_norm, stats.lr, rate,
                (train_cfg.steps - stats.step) / max(rate, 1e-6), accuracy, probe))
            pending, last_post = [], time.monotonic()
        if self._save_to is not None:
            path, self._save_to = self._save_to, None
            self.post_message(self._save(trainer, path))
        name = f"trained {train_cfg.task} · step {trainer.step_count}"
        record = describe_model(trainer.model, trainer.task, name)
        self.post_message(RunEnded(trainer.step_count, self._stop.is_set(), record))

    @staticmethod
    def _probe(trainer) -> dict:
        """The live picture: alignment of every head, and the best head's grid on a probe."""
        from minitx.core.alignment import random_alignment_scores
        from minitx.core.probe import probe
        from minitx.core.tasks import VOCAB

        scores = random_alignment_scores(trainer.model, trainer.task, n=32).tolist()
        best = best_head(scores)
        source = PROBE_SOURCE[: trainer.task.max_len]
        result = probe(trainer.model, trainer.task, source)
        return {"rows": result.cross_attention[best[0], best[1]].tolist(),
                "targets": [VOCAB[t] for t in result.target],
                "source": [VOCAB[t] for t in source], "scores": scores, "best": best}

    # -- messages from the worker -----------------------------------------------------------
    def on_run_started(self, message: RunStarted) -> None:
        self.query_one(TitleBar).set_info(message.summary)

    @one_line_errors
    def on_progress(self, message: Progress) -> None:
        self.progress_messages += 1
        self.losses.extend(message.losses)
        self.last = message
        self.query_one("#loss-spark", Sparkline).data = list(self.losses)
        # layout=False: these lines have a fixed size (minitx.tcss), and a layout pass of the
        # whole screen ten times a second took the GIL from training often enough to cost ~10%.
        self.query_one("#loss-range", Label).update(
            f"{self.losses[0]:.2f} → {_loss(self.losses[-1])}   (min {_loss(min(self.losses))}, "
            f"{len(self.losses)} steps)", layout=False)
        if message.probe:
            p = message.probe
            layer, head = p["best"]
            self.query_one("#probe-panel").border_title = (
                f"probe {' '.join(p['source'])} · L{layer + 1} H{head + 1}, live")
            self.query_one("#probe", AttentionGrid).show(
                p["rows"], p["source"], p["targets"],
                axes="rows: correct outputs (teacher forced) · columns: source")
            self.query_one("#probe-scores", ScoreTable).show(p["scores"], (layer, head),
                                                            note="best head in brackets")
        self._draw_stats()

    @one_line_errors
    def on_run_ended(self, message: RunEnded) -> None:
        self._set_state("stopped" if message.stopped else "finished")
        verb = "stopped" if message.stopped else "finished"
        self.notify(f"training {verb} at step {message.step}; Explore now uses this model",
                    markup=False)
        self.app.post_message(ModelLoaded(message.record))

    def on_saved(self, message: Saved) -> None:
        if message.error:
            self.notify(message.error, severity="error", markup=False)
        else:
            self.notify(f"saved {message.path}", markup=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        self.notify(f"{event.worker.group} failed: {error}", severity="error", markup=False,
                    timeout=10)
        if event.worker.group == "train":
            self._set_state("failed")

    def _draw_stats(self) -> None:
        stats = self.query_one("#stats", Static)
        if self.last is None:
            stats.update({"running": "starting…", "loading": "loading defaults…"}.get(
                self.state, "press space to start training"), layout=False)
            return
        p = self.last
        acc = "" if p.accuracy is None else f"acc {p.accuracy:.1%}  "
        state = "" if self.state == "running" else f"[{self.state}]  "
        # Most telling first: on an 80-column terminal the line is cut at the right.
        stats.update(f"{state}step {p.step}/{p.total}  loss {_loss(p.loss)}  {acc}ETA {p.eta_s:.0f} s  "
                     f"{p.steps_per_s:.0f} steps/s  lr {p.lr:.1e}  grad {p.grad_norm:.2f}", layout=False)
