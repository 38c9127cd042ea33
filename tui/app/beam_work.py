"""The beam view's work in workers, each saying how far it is in the view's status line and
left when the view closes (esc, q): its session (greedy's output first, a big model's hundreds
of steps), and the chosen hypothesis's steps teacher-forced for g and l; the search check (S)
and one step's contrastive attribution (y), each a line where it fails, never a traceback.
Mixed into BeamScreen (tui/app/screens/beam.py), which draws what they make."""

from __future__ import annotations

from textual import work
from textual.widgets import Static
from textual.worker import get_current_worker

from minitx.tui.app.messages import BeamChecked, BeamContrasted, BeamPrepared, BeamPreparing, HypothesisReady


class BeamWork:
    """Needs the screen's `session` (None until made), `_prepare(progress)`, `looking`,
    `checking`, `hypothesis_step`, `play_at_first`, `action_run()` and `redraw()`."""

    def on_mount(self) -> None:
        if self.session is None:
            self.query_one("#beam-status", Static).update("getting ready: greedy's output first · esc leaves")
            self._prepared()
            return
        self._start()

    def _start(self) -> None:
        from minitx.tui.render.beam_tables import settings_line

        s = self.session
        search = s.search
        self.query_one("#beam-box").border_title = \
            f"{s.record.name} · {settings_line(search.beams, search.length_penalty, search.early_stopping)}"
        if self.play_at_first:
            self.action_run()  # the whole search at first sight, drawn as it goes (x resets, → steps)
        else:
            self.redraw()

    @work(thread=True, exclusive=True, group="beam-prepare", exit_on_error=False)
    def _prepared(self) -> None:
        worker = get_current_worker()

        def told(step: int, cap: int) -> bool:
            self.post_message(BeamPreparing(step, cap))
            return worker.is_cancelled  # esc closed the view: stop at this step

        try:
            session = self._prepare(told)
        except ValueError as e:  # settings the search refuses
            self.post_message(BeamPrepared(error=str(e)))
            return
        if not worker.is_cancelled:
            self.post_message(BeamPrepared(session))

    def on_beam_preparing(self, message: BeamPreparing) -> None:
        if self.session is None or self.looking:
            self.query_one("#beam-status", Static).update(
                f"{message.what}, step {message.step} of at most {message.cap} · esc leaves")

    def on_beam_prepared(self, message: BeamPrepared) -> None:
        if message.session is None:
            self.app.notify(f"no beam view: {message.error}", severity="error", markup=False)
            self.dismiss(None)
            return
        self.session = message.session
        self.refresh_bindings()
        self._start()

    @work(thread=True, exclusive=True, group="beam-look", exit_on_error=False)
    def _look(self, node: int, view: str) -> None:
        worker = get_current_worker()

        def told(step: int, cap: int) -> bool:
            self.post_message(BeamPreparing(step, cap, f"the chosen hypothesis's {view}: its steps"))
            return worker.is_cancelled

        self.session.stepper(node, told)
        if not worker.is_cancelled:
            self.post_message(HypothesisReady(node, view))

    def on_hypothesis_ready(self, message: HypothesisReady) -> None:
        self.looking = False
        s = self.session
        if s.selected == message.node and s.view != message.view:
            s.set_view(message.view)
            self.hypothesis_step = len(s.stepper().results) - 1
        self.redraw()

    @work(thread=True, group="beam-contrast", exit_on_error=False)
    def _contrast(self, job) -> None:
        try:
            self.post_message(BeamContrasted(job, job.run()))
        except Exception as e:  # a model the method cannot attribute: a line, never a traceback
            self.post_message(BeamContrasted(job, None, str(e)))

    def on_beam_contrasted(self, message: BeamContrasted) -> None:
        self.session.contrast_done(message.job, message.result, message.error)
        if message.error:
            self.notify(f"cannot attribute: {message.error}", severity="error", markup=False, timeout=10)
        self.redraw()  # and the chosen one's, if the selection moved meanwhile

    @work(thread=True, exclusive=True, group="beam-check", exit_on_error=False)
    def _check(self) -> None:
        try:
            self.post_message(BeamChecked(self.session.run_check()))
        except Exception as e:  # a model the check cannot search: a line, never a traceback
            self.post_message(BeamChecked(None, str(e) or "it could not finish"))

    def on_beam_checked(self, message: BeamChecked) -> None:
        self.checking = False
        if message.error:
            self.notify(f"cannot run the search check: {message.error}", severity="error", markup=False)
        self.redraw()
