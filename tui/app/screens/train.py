"""Train: where a run starts from and its hyperparameters, then a live run you can pause, stop,
save, explore and continue.

The form (tui/app/widgets/train_form.py) turns its fields into configs; each run (tui/app/training.py)
lives in a thread worker that posts messages (tui/app/messages.py); this screen turns those
messages into pixels and keys into requests. No run is thrown away without asking: a new run,
and quitting, first offer to save the one with unsaved steps (the app asks on quit).

Below the form, one of two views (v switches, tui/app/widgets/train_views.py): the run's curves, one
chart at a time (g cycles them), or its attention: the live probe during a run, then the
timeline of the run's probe snapshots (← → p) once it has ended. While a run is going the form
(disabled then) is hidden, so the view has the rows at 80x24; it comes back when the run ends.
"""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Input, Static
from textual.worker import Worker, WorkerState, get_current_worker

from minitx.core.training.run_files import next_run_number, run_name, run_path
from minitx.tui.app.chart_keys import CHART_BINDINGS, TIMELINE_BINDINGS, ChartKeys, TimelineKeys
from minitx.tui.app.errors import one_line_errors
from minitx.tui.app.messages import (
    ChoiceChanged,
    FormDefaults,
    ModelLoaded,
    Progress,
    RunEnded,
    RunStarted,
    Saved,
)
from minitx.tui.app.training import TrainingRun
from minitx.tui.app.widgets.keybar import KeyBar
from minitx.tui.app.widgets.titlebar import TitleBar
from minitx.tui.app.widgets.train_form import SOURCE, Start, TrainForm, choice_values
from minitx.tui.app.widgets.train_views import TrainViews
from minitx.tui.render.numbers import format_loss, percent, short_path

ACTIVE = ("running", "paused", "stopping")  # a worker is stepping (or about to stop)
ENDED = ("finished", "stopped")  # a run's model is there to explore, save or continue


class TrainScreen(ChartKeys, TimelineKeys, Screen):
    HELP_TITLE = "Train"
    HELP_NOTE = ("Tab into the form (← → pick a choice, esc out). from: a recipe, the open\n"
                 "file's configs (like) or its run (resume). A run not saved: quit asks first.")
    AUTO_FOCUS = ""  # the run keys work at once; Tab moves into the form
    # Priority, and not consumed by FormInput: they work even while typing in the form.
    BINDINGS = [
        Binding("space", "toggle", "start/pause", priority=True, tooltip="start, pause, go on"),
        Binding("x", "stop", "stop", priority=True, tooltip="stop the run"),
        Binding("w", "save", "save", priority=True, tooltip="save the run (the note says where)"),
        Binding("u", "use_run", "explore run", priority=True, tooltip="hand the ended run to Explore"),
        Binding("v", "switch_view", "curves/attention", tooltip="curves or attention"),
        *CHART_BINDINGS,
        Binding("left", "frame(-1)", "snapshot", tooltip="snapshot before / after"),
        Binding("right", "frame(1)", "snapshot", tooltip="snapshot before / after"),
        *TIMELINE_BINDINGS,
        Binding("e", "app.switch_mode('explore')", "explore", tooltip="Explore"),
    ]

    def __init__(self) -> None:
        super().__init__()
        # loading | idle | running | paused | stopping | stopped | finished | failed
        self.state = "loading"
        self.current_run: TrainingRun | None = None
        self.ended_record = None  # LoadedModel of the last run that ended (u explores it)
        self.recipes: dict = {}  # name -> core.config.Recipe, once core is loaded
        self.losses: list[float] = []
        self.last: Progress | None = None
        self.progress_messages = 0  # how many Progress messages this run (throttle check)

    @property
    def trainer(self):
        """The Trainer of the latest run (None before the first has built one)."""
        return self.current_run.trainer if self.current_run else None

    @property
    def form(self) -> TrainForm:
        return self.query_one(TrainForm)

    @property
    def views(self) -> TrainViews:
        return self.query_one(TrainViews)

    @property
    def form_error(self) -> str:
        return self.form.error

    @property
    def save_path(self) -> Path:
        """Where `w` saves the latest run, or would save the next one."""
        run = self.current_run
        if run is not None and self.state not in ("idle", "failed"):
            return run.path
        configs = self.form.validate()
        if configs is not None:
            name = run_name(configs[1])
        else:  # a form that does not validate yet: what its task or data field says
            values = self.form.values()
            data = (values.get("data") or "").strip()
            name = Path(data).stem if data else values.get("task") or "reverse"
        return run_path(self.app.save_dir, name, self.next_number(name))

    def next_number(self, task: str) -> int:
        return next_run_number(self.app.save_dir, task, self.current_run.number if self.current_run else 0)

    def compose(self) -> ComposeResult:
        yield TitleBar("Train")
        yield TrainForm()
        yield Static("", id="form-note", markup=False)
        yield Static("press space to start training", id="stats", markup=False)
        yield TrainViews()
        yield KeyBar()

    def on_mount(self) -> None:
        self.app.train_screen = self  # the app asks before a quit would lose a run
        self.form.disabled = True
        self.describe_chart()
        self.app.model_changed.subscribe(self, self._model_changed)
        self._model_changed(self.app)
        self.load_defaults()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        for applies in (self.check_chart_action(action, parameters), self.check_timeline_action(action)):
            if applies is not None:
                return applies
        if action == "use_run":  # offered while a run's model waits to be explored
            return self.ended_record is not None and self.app.current is not self.ended_record
        if action == "frame":
            return self.timeline_shown() and len(self.timeline().steps) > 1
        return True

    # -- the two views (the keys of tui/app/chart_keys.py ask which one is shown) --------------------
    def charts_shown(self) -> bool:
        return self.views.charts_shown

    def timeline_shown(self) -> bool:
        return self.views.timeline_shown

    def export_numbers(self):
        """The numbers beside the picture when E exports this screen (tui/app/exports.py): the
        run's curves, or the probe's attention shown."""
        from minitx.tui.app.exports import curves_numbers, grid_numbers, timeline_numbers

        views = self.views
        if views.charts_shown:
            return curves_numbers(views.chart, "train")
        if views.timeline_shown:
            return timeline_numbers(views.timeline, "train")
        return grid_numbers(views.query_one("#probe"), "train-probe")

    def action_switch_view(self) -> None:
        self.views.switch()
        self.refresh_bindings()

    def action_frame(self, delta: int) -> None:
        self.timeline().step_by(delta)

    # -- the form --------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="defaults", exit_on_error=False)
    def load_defaults(self) -> None:
        from minitx.core.config import RECIPES

        self.post_message(FormDefaults({name: make() for name, make in RECIPES.items()}, choice_values()))

    def on_form_defaults(self, message: FormDefaults) -> None:
        from minitx.core.config import DEFAULT_RECIPE

        self.recipes = message.recipes
        self.form.offer(self._starts(), message.choices, DEFAULT_RECIPE)
        self.form.disabled = False
        self.state = "idle"
        self.validate_form()
        self._model_changed(self.app)

    def _starts(self) -> dict[str, Start]:
        """Every recipe, and the open checkpoint's configs (like) and saved run (resume)."""
        starts = {name: Start(f"recipe {name}", r.model, r.train) for name, r in self.recipes.items()}
        current = self.app.current
        if current is not None and current.train_config is not None:
            starts["like"] = Start(f"like {current.name}", current.model.cfg, current.train_config)
            if current.resumable and current.path:
                starts["resume"] = Start(f"resume {current.name} (step {current.steps})",
                                         current.model.cfg, current.train_config, current.path,
                                         current.steps or 0)
        return starts

    def _model_changed(self, app) -> None:
        if self.recipes and self.state not in ACTIVE:
            self.form.offer(self._starts())
            self.validate_form()
        self._draw_title()

    def _draw_title(self) -> None:
        if self.state in ACTIVE:
            return  # the run's own description (RunStarted)
        app = self.app
        self.query_one(TitleBar).set_info(f"exploring {app.current.name}" if app.current else app.status)

    def validate_form(self):
        configs = self.form.validate()
        self._draw_note()
        return configs

    def on_input_changed(self, event: Input.Changed) -> None:
        self.validate_form()

    def on_choice_changed(self, message: ChoiceChanged) -> None:
        if message.field.id == SOURCE:
            self.form.fill()
            self._draw_title()
        self.validate_form()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_toggle()

    def action_leave_form(self) -> None:
        self.set_focus(None)

    # -- run control -----------------------------------------------------------------------------
    @one_line_errors
    def action_toggle(self) -> None:
        run = self.current_run
        if self.state == "running":
            run.paused.set()
            self._set_state("paused")
        elif self.state == "paused":
            run.paused.clear()
            self._set_state("running")
        elif self.state in ("idle", *ENDED, "failed"):
            self.start_asking()

    def start_asking(self) -> None:
        """Start a new run; first ask what to do with the last one if it has unsaved steps."""
        run = self.current_run
        if run is None or run.unsaved_steps <= 0 or self.state == "failed":
            self.start()
            return

        def chosen(answer: str | None) -> None:
            if answer == "save":
                self.save_now()
                if run.unsaved_steps > 0:
                    return  # the save failed (said so): keep the run
            if answer in ("save", "drop"):
                self.start()

        self.app.ask(f"start a new run? {run.name} has {run.unsaved_steps} steps not saved", [
            ("s", f"save it to {short_path(run.path)} first", "save"),
            ("d", "drop it", "drop"),
            ("escape", "cancel: keep it", None)], chosen)

    def start(self) -> None:
        configs = self.validate_form()
        if configs is None:
            self.notify(f"fix the form first: {self.form_error}", severity="warning", markup=False)
            return
        start = self.form.start
        name = run_name(configs[1])
        number = self.next_number(name)
        self.losses, self.last, self.progress_messages = [], None, 0
        self.ended_record = None
        self.current_run = TrainingRun(number, *configs, run_path(self.app.save_dir, name, number),
                                       post=self.post_message, resume_from=start.resume_path)
        self.views.new_run()
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
        elif self.state in ACTIVE:
            self.current_run.save_to = str(self.current_run.path)  # the worker saves between steps
        else:
            self.save_now()

    def save_now(self) -> Saved:
        """Save the latest run on the UI thread; only when no step is running.

        Synchronously: a minitx checkpoint writes in tens of milliseconds, and a save that has
        returned cannot be lost by quitting next (a worker or thread left a race with the exit).
        """
        saved = self.current_run.save_now(self.trainer, str(self.current_run.path))
        self.on_saved(saved)
        return saved

    def save_for_exit(self) -> Saved:
        """Stop the latest run where it is (waiting for the step in flight) and save it."""
        run = self.current_run
        run.stop.set()
        run.paused.clear()
        run.halted.wait(timeout=60)
        return run.save_now(run.trainer, str(run.path))

    @one_line_errors
    def action_use_run(self) -> None:
        if self.ended_record is not None:
            self.app.post_message(ModelLoaded(self.ended_record))
            self.refresh_bindings()

    def _set_state(self, state: str) -> None:
        self.state = state
        self.form.disabled = state in (*ACTIVE, "loading")
        # A running run cannot be edited, and its chart needs the rows at 80x24: the form gives
        # them up until the run ends (the title bar names the run meanwhile).
        self.form.display = state not in ACTIVE
        self._draw_stats()
        self._draw_note()
        self._publish_run()
        self.refresh_bindings()

    @work(thread=True, exclusive=True, group="train", exit_on_error=False)
    def run_training(self, run: TrainingRun) -> None:
        worker = get_current_worker()
        run.train(lambda: worker.is_cancelled)

    # -- messages from the worker ----------------------------------------------------------------
    def on_run_started(self, message: RunStarted) -> None:
        self.query_one(TitleBar).set_info(message.summary)
        self.views.run_started(self.current_run.name, self.trainer.history)

    @one_line_errors
    def on_progress(self, message: Progress) -> None:
        self.progress_messages += 1
        self.losses.extend(message.losses)
        self.last = message
        self.views.progress(message)
        self._draw_stats()
        self._publish_run()

    @one_line_errors
    def on_run_ended(self, message: RunEnded) -> None:
        self.ended_record = message.record
        trainer = self.trainer
        self.views.run_ended(trainer.history, trainer.task)
        self._set_state("stopped" if message.stopped else "finished")
        verb = "stopped" if message.stopped else "finished"
        if trainer.until_reached_at is not None:
            verb = f"reached {percent(trainer.last_accuracy)} exact match (until), stopped"
        self.notify(f"{self.current_run.name} {verb} at step {message.step} · u explores it, "
                    "w saves it", markup=False)

    def on_saved(self, message: Saved) -> None:
        if message.error:
            self.notify(message.error, severity="error", markup=False)
        else:
            self.notify(f"saved {message.path}", markup=False)
        self._draw_note()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        self.notify(f"{event.worker.group} failed: {error}", severity="error", markup=False,
                    timeout=10)
        if event.worker.group == "train":
            self._set_state("failed")

    # -- drawing ---------------------------------------------------------------------------------
    def _publish_run(self) -> None:
        """What the other screens' title bars say about the run."""
        run, app = self.current_run, self.app
        if run is None or self.state in ("idle", "loading", "failed"):
            status = ""
        elif self.state in ENDED:
            status = f"run {run.number} {'done' if self.state == 'finished' else 'stopped'}"
        else:
            share = f" · {self.last.step * 100 // max(1, self.last.total)}%" if self.last else ""
            status = f"● run {run.number}{share}" + (" paused" if self.state == "paused" else "")
        if status != app.run_status:
            app.run_status = status
            app.run_changed.publish(app)

    def _draw_note(self) -> None:
        """The form's first problem, or where `w` saves."""
        note = self.query_one("#form-note", Static)
        run = self.current_run
        if self.form.error and self.state not in ACTIVE:
            note.update(f"✗ {self.form.error}")
            return
        where = short_path(self.save_path)
        if run is None or self.state in ("idle", "failed"):
            note.update(f"w will save the next run to {where}")
        elif run.saved_step is not None:
            note.update(f"w saves {run.name} to {where} (saved at step {run.saved_step})")
        else:
            note.update(f"w saves {run.name} to {where}")

    def _draw_stats(self) -> None:
        stats = self.query_one("#stats", Static)
        if self.last is None:
            stats.update({"running": "starting…", "loading": "loading torch and the recipes…"}.get(
                self.state, "press space to start training"), layout=False)
            return
        p = self.last
        parts = [f"step {p.step}/{p.total}", f"loss {format_loss(p.loss)}"]
        if p.accuracy is not None:
            parts.append(f"acc {percent(p.accuracy)}")
        if self.state in ACTIVE:
            parts += [f"{p.steps_per_s:.0f} steps/s", f"ETA {p.eta_s:.0f} s"]
        elif self.state in ENDED:
            parts.append("u explores it" if self.check_action("use_run", ()) else "explored")
        state = "" if self.state == "running" else f"[{self.state}] "
        stats.update(state + " · ".join(parts), layout=False)
