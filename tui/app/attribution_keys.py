"""The attribution keys of a decoding screen (Explore, Compare): y puts each step's source
attribution row (core/interp/source_attribution.py) under its attention row and changes the
method, Y shows every step's beside the head's cross-attention. Which attributions to compute
when a key or a step asks for them, on the screen's thread or in workers, how far a worker is,
Esc stopping it, and what a failure says.

Mixed into DecodeKeys (tui/app/decode_keys.py), whose `sessions()` and `refresh_view()` it uses;
refresh_view calls `_start_attributions` before the panels draw.
"""

from __future__ import annotations

from textual import work
from textual.binding import Binding
from textual.worker import Worker, WorkerState, get_current_worker

from minitx.tui.app.errors import one_line_errors
from minitx.tui.app.messages import AttributionProgress, AttributionReady

# Which source tokens each output depends on (core/interp/source_attribution.py): y puts the
# step's attribution row under its attention row and changes the method; Y the whole matrix
# beside the head's cross-attention. In the help: Explore's footer is full at 80x24.
ATTRIBUTION_BINDINGS = [
    Binding("y", "attribution", "attrib", show=False,
            tooltip="attribution row (again: the next method)"),
    Binding("Y", "view('attribution')", "attrib matrix", show=False,
            tooltip="every step's, beside the head"),
]

IN_A_WORKER = ("ig",)  # the attribution methods that cost many backward passes: off the screen's thread


class AttributionKeys:
    """Mixed into DecodeKeys: the attribution keys, and the attributions a redraw needs."""

    @one_line_errors
    def action_attribution(self) -> None:
        """y: the attribution row on (the first method), the next method, then off; in the matrix
        view the methods only (the view itself needs one: Y leaves it)."""
        sessions = self.sessions()
        for session in sessions:
            session.next_method(with_off=session.view_mode != "attribution")
        if sessions and sessions[0].attribution_method is None:  # a method names itself on its row
            self.notify("attribution row off (y: on again)", timeout=2)
        self.refresh_view()

    def _start_attributions(self) -> None:
        """Each attribution on screen not computed yet (each key once), before the panels draw:
        here when it costs about a decode (ixg, occlusion, the rollout on a bundled model: every
        step in one batch, so the row is on the key's first frame), in workers when it costs
        many (ig; ixg and occlusion too where the model and the decode take more than one
        batch). A worker whose attribution is no longer on screen (another method, source or
        model) stops."""
        self._stop_unwanted()
        for session in self.sessions():
            if self._in_a_worker(session):
                self._start_in_workers(session)
                continue
            job = session.attribution_wanted()
            if job is None:
                continue
            try:
                session.attribution_done(job, job.run())
            except Exception as e:  # one line, the row goes: the app goes on
                self._attribution_error(e)
                return

    @staticmethod
    def _in_a_worker(session) -> bool:
        from minitx.core.interp.source_attribution import batch_count

        method, stepper = session.attribution_method, session.stepper
        if method in IN_A_WORKER:
            return True
        if not session.attribution_shown or not stepper.results or session.attribution is not None:
            return False
        return batch_count(session.record.model, len(stepper.src_ids), len(stepper.results), method) > 1

    def _start_in_workers(self, session) -> None:
        """A costly method (ig: 32 backward passes a step): the current step's row alone first,
        then, once no row is being computed, every step's (the matrix, the other steps' rows), so
        the two never compete for the cores and the row comes after one step's work. The matrix
        view asks for every step at once. The screen's thread never waits, whatever the model."""
        row = session.step_attribution_wanted() if session.view_mode != "attribution" else None
        if row is not None:
            self._started(row, self._attribute(row))
        if not session.steps_asked and (job := session.attribution_wanted()) is not None:
            self._started(job, self._attribute(job))

    @work(thread=True, group="attribution", exit_on_error=False)
    def _attribute(self, job) -> None:
        """Compute `job`, saying how far after each batch; a cancelled worker stops at its next
        batch and posts nothing."""
        from minitx.core.interp.source_attribution import Cancelled

        worker = get_current_worker()

        def progress(done: float, total: int) -> bool:
            self.post_message(AttributionProgress(job, done, total))
            return worker.is_cancelled

        try:
            result = job.run(progress)
        except Cancelled:
            return
        if not worker.is_cancelled:
            self.post_message(AttributionReady(job, result))

    # -- the workers running --------------------------------------------------------------------
    def _started(self, job, worker: Worker | None) -> None:
        if worker is not None:  # (a test may hold the job instead of starting a worker)
            self._attribution_workers()[worker] = job

    def _attribution_workers(self) -> dict:
        """worker -> its job, of the workers still running (this screen's)."""
        if not hasattr(self, "_workers_jobs"):
            self._workers_jobs = {}
        for worker in [w for w in self._workers_jobs if w.is_finished or w.is_cancelled]:
            del self._workers_jobs[worker]
        return self._workers_jobs

    def attributing(self) -> bool:
        """Whether an attribution is being computed in a worker (Esc stops it)."""
        return bool(self._attribution_workers())

    def stop_attributions(self) -> bool:
        """Esc while attributions are computed in workers: stop them (each at its next batch;
        nothing they computed is drawn) and take the row off until y asks again. True if there
        were any."""
        workers = self._attribution_workers()
        if not workers:
            return False
        for worker in list(workers):
            worker.cancel()
        for session in self.sessions():
            session.stop_attributions()
        self.notify("attribution stopped (y: again)", timeout=3)
        self.refresh_view()
        return True

    def _stop_unwanted(self) -> None:
        """Stop each worker whose attribution no session shows any more: the method, the source,
        the heads knocked out or the model changed, or a step's own row when the step did
        (minutes of a big model's work for nothing, and no more than a row's and the matrix's
        workers, each in one batch's memory, at once)."""
        shown = {(id(s.record), s.attribution_key()) for s in self.sessions()}
        rows = {(id(s.record), s.attribution_key(), s.position - 1) for s in self.sessions()
                if s.view_mode != "attribution"}
        for worker, job in list(self._attribution_workers().items()):
            if (id(job.record), job.key) not in shown or \
                    (job.step is not None and (id(job.record), job.key, job.step) not in rows):
                worker.cancel()
                for session in self.sessions():
                    session.attribution_given_up(job)

    def on_attribution_progress(self, message: AttributionProgress) -> None:
        job = message.job
        for panel in self.decode_panels():
            session = panel.session
            asked = job.key in session.attributions_asked if job.step is None \
                else (job.key, job.step) in session.steps_asked
            if session.record is job.record and asked:  # (not a job stopped meanwhile)
                session.attribution_progress[job.key, job.step] = message.done / max(1, message.total)
                panel.redraw()

    def on_attribution_ready(self, message: AttributionReady) -> None:
        for session in self.sessions():
            if session.record is message.job.record:
                session.attribution_done(message.job, message.result)
        self.refresh_view()

    def attribution_failed(self, event) -> bool:
        """A worker's attribution failed: say so in one line (True: the event was that)."""
        if event.worker.group != "attribution" or event.state != WorkerState.ERROR:
            return False
        event.stop()
        self._attribution_error(event.worker.error)
        self.refresh_view()
        return True

    def _attribution_error(self, error: BaseException) -> None:
        for session in self.sessions():
            session.stop_attributions()  # the row goes; a later key may try again
        self.notify(f"cannot attribute: {error}", severity="error", markup=False, timeout=10)
