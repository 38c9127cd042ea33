"""Train: a form for the main hyperparameters, then a live run you can pause, stop and save.

The form (tui/widgets/train_form.py) turns its fields into configs; the run (tui/training.py)
lives in a thread worker that posts messages (tui/messages.py); this screen only turns those
messages into pixels and keys into requests.

Below the form, one of two views (v switches): the run's curves, one chart at a time (g cycles
them), or its attention: the live probe during a run, then the timeline of the run's probe
snapshots (← → p) once it has ended.
"""

from __future__ import annotations

import time
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Input, Select, Static
from textual.worker import Worker, WorkerState, get_current_worker

from minitx.tui.chart_keys import CHART_BINDINGS, TIMELINE_BINDINGS, ChartKeys, TimelineKeys
from minitx.tui.errors import one_line_errors
from minitx.tui.format import format_loss
from minitx.tui.messages import (
    FormDefaults,
    ModelLoaded,
    Progress,
    RunEnded,
    RunStarted,
    Saved,
    TimelineMoved,
)
from minitx.tui.training import TrainingRun, run_name, save
from minitx.tui.widgets.attention import AttentionGrid, ScoreTable
from minitx.tui.widgets.curve_chart import CurveChart
from minitx.tui.widgets.keybar import KeyBar
from minitx.tui.widgets.timeline import Timeline
from minitx.tui.widgets.titlebar import TitleBar
from minitx.tui.widgets.train_form import TrainForm

ACTIVE = ("running", "paused", "stopping")  # a worker is stepping (or about to stop)
CHART_INTERVAL = 0.5  # seconds between redraws of the live chart (a redraw takes ~10 ms)


class TrainScreen(ChartKeys, TimelineKeys, Screen):
    AUTO_FOCUS = ""  # the run keys work at once; Tab moves into the form
    # Priority, and not consumed by FormInput: they work even while typing in the form.
    BINDINGS = [
        Binding("space", "toggle", "start/pause", priority=True),
        Binding("x", "stop", "stop", priority=True),
        Binding("w", "save", "save", priority=True),
        Binding("v", "switch_view", "curves/attention"),
        *CHART_BINDINGS,
        Binding("left", "frame(-1)", "snapshot"),
        Binding("right", "frame(1)", "snapshot"),
        *TIMELINE_BINDINGS,
        Binding("e", "app.switch_mode('explore')", "explore"),
    ]

    def __init__(self) -> None:
        super().__init__()
        # loading | idle | running | paused | stopping | stopped | finished | failed
        self.state = "loading"
        self.current_run: TrainingRun | None = None
        self.losses: list[float] = []
        self.last: Progress | None = None
        self.progress_messages = 0  # how many Progress messages this run (throttle check)
        self.chart_drawn = 0.0  # when the live chart was last redrawn

    @property
    def trainer(self):
        """The Trainer of the latest run (None before the first has built one)."""
        return self.current_run.trainer if self.current_run else None

    @property
    def form(self) -> TrainForm:
        return self.query_one(TrainForm)

    @property
    def form_error(self) -> str:
        return self.form.error

    def compose(self) -> ComposeResult:
        yield TitleBar("Train")
        yield TrainForm()
        yield Static("", id="form-error", markup=False)
        yield Static("press space to start training", id="stats", markup=False)
        with ContentSwitcher(initial="curves-panel", id="train-views"):
            with Vertical(id="curves-panel"):
                yield CurveChart(id="curves")
            with Horizontal(id="probe-row"):
                with Vertical(id="probe-panel"):
                    yield AttentionGrid(id="probe")
                    yield Timeline(id="timeline")
                with Vertical(id="probe-scores-panel"):
                    yield ScoreTable(id="probe-scores")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#probe-panel").border_title = "probe · cross-attention of the best head"
        self.query_one("#probe-scores-panel").border_title = "alignment, live"
        self.form.disabled = True
        self.query_one("#probe", AttentionGrid).show(
            [], [], [], hint="the best head on the probe source, live")
        self.timeline().display = False
        self.curve_chart().show_runs([], note="press space to train: its curves draw here as it runs")
        self.describe_chart()
        self.app.model_changed.subscribe(self, self._model_changed)
        self._model_changed(self.app)
        self.load_defaults()

    # -- the two views ---------------------------------------------------------------------------
    def charts_shown(self) -> bool:
        return self.query_one(ContentSwitcher).current == "curves-panel"

    def timeline_shown(self) -> bool:
        return not self.charts_shown() and self.timeline().display

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        for check in (self.check_chart_action, self.check_timeline_action):
            applies = check(action)
            if applies is not None:
                return applies
        if action == "frame":
            return self.timeline_shown() and len(self.timeline().steps) > 1
        return True

    def action_switch_view(self) -> None:
        switcher = self.query_one(ContentSwitcher)
        switcher.current = "probe-row" if self.charts_shown() else "curves-panel"
        self.refresh_bindings()

    def action_frame(self, delta: int) -> None:
        self.timeline().step_by(delta)

    def on_timeline_moved(self, message: TimelineMoved) -> None:
        timeline = self.timeline()
        if timeline.scores:
            self.query_one("#probe-scores", ScoreTable).show(
                timeline.scores[timeline.index], timeline.head, note=f"at step {timeline.step}")

    def _show_timeline(self, shown: bool) -> None:
        """After a run: its snapshots in place of the live probe (a new run brings that back)."""
        self.query_one("#probe", AttentionGrid).display = not shown
        self.timeline().display = shown
        if shown:
            self.timeline().show_history(self.trainer.history, self.trainer.task)
            self.query_one("#probe-panel").border_title = (
                f"timeline · probe {' '.join(self.timeline().source)}")
            self.query_one("#probe-scores-panel").border_title = "alignment, then"
        else:
            self.query_one("#probe-scores-panel").border_title = "alignment, live"
        self.refresh_bindings()

    def _model_changed(self, app) -> None:
        if self.state in ACTIVE:
            return  # the title names the run
        explored = f"Explore uses {app.current.name}" if app.current else app.status
        recipe = f"recipe {self.form.recipe.name} · " if self.form.recipe else ""
        self.query_one(TitleBar).set_info(f"new run: {recipe}{explored}")

    # -- the form --------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="defaults", exit_on_error=False)
    def load_defaults(self) -> None:
        from minitx.core.config import (
            ACTIVATIONS,
            DEFAULT_RECIPE,
            DEVICES,
            NORM_KINDS,
            NORMS,
            POSITION_ENCODINGS,
            TOKENISATIONS,
            recipe,
        )
        from minitx.core.tasks import TASKS

        self.post_message(FormDefaults(recipe(DEFAULT_RECIPE), {
            "task": list(TASKS), "norm": list(NORMS), "device": list(DEVICES),
            "norm_kind": list(NORM_KINDS), "activation": list(ACTIVATIONS),
            "position_encoding": list(POSITION_ENCODINGS), "tokens": list(TOKENISATIONS)}))

    def on_form_defaults(self, message: FormDefaults) -> None:
        self.form.fill(message.recipe, message.choices)
        self.form.disabled = False
        self.state = "idle"
        self.validate_form()
        self._model_changed(self.app)

    def form_values(self) -> dict:
        return self.form.values()

    def validate_form(self):
        configs = self.form.validate()
        error = self.form.error
        self.query_one("#form-error", Static).update(f"✗ {error}" if error else "")
        return configs

    def on_input_changed(self, event: Input.Changed) -> None:
        self.validate_form()

    def on_select_changed(self, event: Select.Changed) -> None:
        self.validate_form()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_toggle()

    def action_leave_form(self) -> None:
        self.set_focus(None)

    # -- run control -----------------------------------------------------------------------------
    @one_line_errors
    def action_toggle(self) -> None:
        if self.state == "running":
            self.current_run.paused.set()
            self._set_state("paused")
        elif self.state == "paused":
            self.current_run.paused.clear()
            self._set_state("running")
        elif self.state in ("idle", "finished", "stopped", "failed"):
            self.start()

    def start(self) -> None:
        configs = self.validate_form()
        if configs is None:
            self.notify(f"fix the form first: {self.form_error}", severity="warning", markup=False)
            return
        self.losses, self.last, self.progress_messages = [], None, 0
        self.current_run = TrainingRun(*configs, post=self.post_message)
        self.curve_chart().show_runs([], note="starting…")
        self._show_timeline(False)
        self._set_state("running")
        self.set_focus(None)
        self.run_training(self.current_run)

    def action_stop(self) -> None:
        if self.state in ("running", "paused"):
            self.current_run.stop.set()
            self.current_run.paused.clear()
            self._set_state("stopping")

    @one_line_errors
    def action_save(self) -> None:
        if self.trainer is None:
            self.notify("nothing to save yet: train a model first", severity="warning")
            return
        path = str(Path(self.app.save_dir) / f"minitx-{run_name(self.trainer.cfg)}-"
                   f"step{self.trainer.step_count}.safetensors")
        if self.state in ACTIVE:
            self.current_run.save_to = path  # the worker saves between two steps
        else:
            # Synchronously, on the UI thread: no run is in progress, a minitx checkpoint writes
            # in tens of milliseconds, and a save that has returned cannot be lost by quitting
            # next (a worker or thread left a race with the app's exit).
            self.on_saved(save(self.trainer, path))

    def _set_state(self, state: str) -> None:
        self.state = state
        self.form.disabled = state in (*ACTIVE, "loading")
        self._draw_stats()

    @work(thread=True, exclusive=True, group="train", exit_on_error=False)
    def run_training(self, run: TrainingRun) -> None:
        worker = get_current_worker()
        run.train(lambda: worker.is_cancelled, f"trained {run_name(run.train_cfg)}")

    # -- messages from the worker ----------------------------------------------------------------
    def on_run_started(self, message: RunStarted) -> None:
        self.query_one(TitleBar).set_info(message.summary)
        self.curve_chart().show_runs([("this run", self.trainer.history)])  # drawn as it grows

    @one_line_errors
    def on_progress(self, message: Progress) -> None:
        self.progress_messages += 1
        self.losses.extend(message.losses)
        self.last = message
        now = time.monotonic()
        if now - self.chart_drawn >= CHART_INTERVAL or message.step == message.total:
            # Without layout: the chart's size is fixed by the screen, and a layout pass of the
            # whole screen ten times a second took the GIL from training often enough to cost ~10%.
            self.curve_chart().refresh()
            self.chart_drawn = now
        if message.probe:
            p = message.probe
            layer, head = p["best"]
            self.query_one("#probe-panel").border_title = (
                f"probe {p['source_text']} · L{layer + 1} H{head + 1}, live")
            self.query_one("#probe", AttentionGrid).show(
                p["rows"], p["source"], p["targets"],
                axes="rows: correct outputs (teacher forced) · columns: source")
            self.query_one("#probe-scores-panel").border_title = f"{p['measure']}, live"
            self.query_one("#probe-scores", ScoreTable).show(p["scores"], (layer, head),
                                                            note="best head in brackets")
        self._draw_stats()

    @one_line_errors
    def on_run_ended(self, message: RunEnded) -> None:
        self._set_state("stopped" if message.stopped else "finished")
        verb = "stopped" if message.stopped else "finished"
        reached = self.trainer.until_reached_at
        if reached is not None:
            verb = f"reached {self.trainer.last_accuracy:.1%} exact match (until) and stopped"
        self.notify(f"training {verb} at step {message.step}; Explore now uses this model",
                    markup=False)
        self.curve_chart().refresh()
        self._show_timeline(True)
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
        stats.update(f"{state}step {p.step}/{p.total}  loss {format_loss(p.loss)}  {acc}"
                     f"ETA {p.eta_s:.0f} s  {p.steps_per_s:.0f} steps/s  lr {p.lr:.1e}  "
                     f"grad {p.grad_norm:.2f}", layout=False)
