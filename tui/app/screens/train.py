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
from minitx.tui.app.chart_keys import (
    CHART_ACTIONS,
    CHART_BINDINGS,
    TIMELINE_ACTIONS,
    TIMELINE_BINDINGS,
    TIMELINE_EDGE_BINDINGS,
    TIMELINE_HEAD_BINDINGS,
    ChartKeys,
    TimelineKeys,
)
from minitx.tui.app.errors import one_line_errors
from minitx.tui.app.key_reasons import ExplainedKeys
from minitx.tui.app.messages import ModelLoaded, Progress, RunEnded, RunStarted, Saved, Watching
from minitx.tui.app.run_check import FormChecks
from minitx.tui.app.training import ACTIVE, ENDED, TrainingRun
from minitx.tui.app.widgets.keybar import KeyBar
from minitx.tui.app.widgets.titlebar import TitleBar
from minitx.tui.app.widgets.train_form import TrainForm
from minitx.tui.app.widgets.train_views import TrainViews
from minitx.tui.render.numbers import format_loss, percent, rate, short_path

TALL = 32  # rows from which a fine-tune's probe lines stay beside the form once its run ends


class TrainScreen(FormChecks, ExplainedKeys, ChartKeys, TimelineKeys, Screen):
    HELP_TITLE = "Train"
    TIMELINE_HINT = "once a run has ended, v shows them"
    HELP_NOTE = ("Tab into the form: ← → pick a choice, Enter starts a run, esc leaves it.\n"
                 "from: a recipe, the open file's configs (like) or its run (resume).\n"
                 "fine-tune: its own fields (lora, keep best, languages, guided head) instead\n"
                 "of the architecture, which is the base's.\n"
                 "A run not saved: a new run or quit asks first (after checking the new run).")
    AUTO_FOCUS = ""  # the run keys work at once; Tab moves into the form
    # Not priority: a text field of the form takes every printable key (Enter starts a run from
    # there); on a choice field, or out of the form, these keys drive the run.
    BINDINGS = [
        Binding("space", "toggle", "start/pause", tooltip="start, pause, go on"),
        Binding("x", "stop", "stop", tooltip="stop the run"),
        Binding("w", "save", "save", tooltip="save the run (the note says where)"),
        Binding("u", "use_run", "explore run", tooltip="hand the ended run to Explore"),
        Binding("v", "switch_view", "curves/attention", tooltip="curves or attention"),
        *CHART_BINDINGS,
        Binding("left", "frame(-1)", "snapshot", tooltip="snapshot before / after"),
        Binding("right", "frame(1)", "snapshot", tooltip="snapshot before / after"),
        *TIMELINE_BINDINGS,
        *TIMELINE_EDGE_BINDINGS,
        *TIMELINE_HEAD_BINDINGS,
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
        self.alarmed = False

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
    def save_path(self) -> Path:
        """Where `w` saves the latest run, or would save the next one."""
        run = self.current_run
        if run is not None and self.state not in ("idle", "failed"):
            return run.path
        configs = self.form_configs
        if configs is not None:
            name = run_name(configs[1].task, configs[1].data)
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

    def why_not(self, action: str, parameters: tuple[object, ...]) -> str | None:
        if action in CHART_ACTIONS:
            return self.chart_why_not(parameters)
        if action in (*TIMELINE_ACTIONS, "frame"):
            return self.timeline_why_not(action)
        state = self.state
        if action == "toggle" and state in ("loading", "stopping"):
            return "loading torch and the recipes…" if state == "loading" else "the run is stopping…"
        if action == "stop" and state not in ("running", "paused"):
            return "no run is going: x stops one while it trains"
        if action == "save" and self.trainer is None:
            return "nothing to save yet: train a model first (space starts)"
        if action == "use_run":  # offered while a run's model waits to be explored
            if self.ended_record is None:
                return "no run has ended yet: u hands an ended run to Explore"
            if self.app.current is self.ended_record:
                return "Explore has this run already: e shows it"
        return None

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
        self.step_timeline(delta)

    # -- the form (the form's side of it: tui/app/run_check.py's FormChecks) ------------------
    def _model_changed(self, app) -> None:
        if self.recipes and self.state not in ACTIVE:
            self.form.offer(self._starts(), chosen=self.first_start())
            self.validate_form()
        self._draw_title()

    def _draw_title(self) -> None:
        if self.state in ACTIVE:
            return  # the run's own description (RunStarted)
        app = self.app
        self.query_one(TitleBar).set_info(f"exploring {app.current.name}" if app.current else app.status)

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
        """Start a new run once its form and its data are known to be good; only then ask what to
        do with the last run, if it has unsaved steps (a run that cannot start drops nothing)."""
        configs = self.validate_form()
        if configs is None:
            self.notify(f"fix the form first: {self.form_error}", severity="warning", markup=False)
            return
        checked = self.checked
        if not self.check_holds():
            self.check_now()  # on_run_checked comes back here
            return
        if checked.error:
            self.notify(f"cannot start: {checked.error}", severity="error", markup=False, timeout=8)
            return
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

        self.app.ask(f"start a new run? {run.unsaved}", [
            ("s", f"save it first: {short_path(run.path)}", "save"),
            ("d", "drop it", "drop"),
            ("escape", "cancel: keep it", None)], chosen)

    def start(self) -> None:
        configs = self.form_configs
        if configs is None:
            return
        start = self.form.start
        name = run_name(configs[1].task, configs[1].data)
        number = self.next_number(name)
        self.losses, self.last, self.progress_messages = [], None, 0
        self.alarmed = False  # the forgetting alarm has been said
        self.ended_record = None
        self.current_run = TrainingRun(number, *configs, run_path(self.app.save_dir, name, number),
                                       post=self.post_message, resume_from=start.resume_path,
                                       base=start.base)
        self.views.new_run()
        self._set_state("running")
        self.set_focus(None)
        if self.check_holds():  # what `train` prints as it starts: how the file was read, a slow device
            for note in self.checked.notes:
                self.notify(note, markup=False, timeout=10)
            if self.checked.slow:
                self.notify(self.checked.slow, severity="warning", markup=False, timeout=10)
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
            self.notify(f"saving to {short_path(self.current_run.path)} once the step in flight ends…",
                        markup=False)
        else:  # said first: a large model's file takes seconds, and the save holds the screen
            self.notify(f"saving to {short_path(self.current_run.path)}…", markup=False)
            self.call_after_refresh(self.save_now)

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
            self.app.switch_mode("explore")  # where the run is explored

    def _set_state(self, state: str) -> None:
        self.state = state
        self.form.disabled = state in (*ACTIVE, "loading")
        # A running run cannot be edited, and its chart needs the rows at 80x24: the form gives
        # them up until the run ends (the title bar names the run meanwhile).
        self.form.display = state not in ACTIVE
        self._draw_stats()
        self.draw_note()
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
    def on_watching(self, message: Watching) -> None:
        self.views.watching(message)
        if message.alarm and not self.alarmed:  # the moment it goes off: said once, in red
            self.alarmed = True
            self.notify(message.alarm, severity="error", markup=False, timeout=10)

    @one_line_errors
    def on_run_ended(self, message: RunEnded) -> None:
        self.ended_record = message.record
        trainer = self.trainer
        self.views.run_ended(trainer.history, trainer.task, tall=self.app.size.height >= TALL)
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
        self.draw_note()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        if event.worker.group == "check":
            self.check_failed(error)
            return
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

    def _draw_stats(self) -> None:
        stats = self.query_one("#stats", Static)
        if self.last is None:
            stats.update({"running": "starting…", "loading": "loading torch and the recipes…"}.get(
                self.state, "press space to start training"), layout=False)
            return
        p = self.last
        parts = [f"step {p.step}/{p.total}", f"loss {format_loss(p.loss)}"]
        if p.scores:  # a fine-tune's held-out BLEU and chrF, its base's first (its exact match: below)
            parts.append(p.scores)
        elif p.accuracy is not None:
            parts.append(p.accuracy)
        if self.state in ACTIVE:
            parts += [f"ETA {p.eta_s:.0f} s"] if p.scores else [f"{rate(p.steps_per_s)} steps/s",
                                                                f"ETA {p.eta_s:.0f} s"]
        elif self.state in ENDED and not p.scores:  # (a fine-tune's scores take the room: u is below)
            parts.append("u explores it" if self.check_action("use_run", ()) else "explored")
        state = "" if self.state == "running" else f"[{self.state}] "
        stats.update(state + " · ".join(parts), layout=False)
