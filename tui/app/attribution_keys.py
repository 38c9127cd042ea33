"""The attribution keys of a decoding screen (Explore, Compare): y puts each step's source
attribution row (core/interp/source_attribution.py) under its attention row and changes the
method, Y shows every step's beside the head's cross-attention. Which attributions to compute
when a key or a step asks for them, on the screen's thread or in workers, and what a failure says.

Mixed into DecodeKeys (tui/app/decode_keys.py), whose `sessions()` and `refresh_view()` it uses;
refresh_view calls `_start_attributions` before the panels draw.
"""

from __future__ import annotations

from textual import work
from textual.binding import Binding
from textual.worker import WorkerState

from minitx.tui.app.errors import one_line_errors
from minitx.tui.app.messages import AttributionReady

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
        here when it costs about a decode (ixg, occlusion, the rollout: every step at once, so
        the row is on the key's first frame), in workers when it costs many (ig)."""
        for session in self.sessions():
            if session.attribution_method in IN_A_WORKER:
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

    def _start_in_workers(self, session) -> None:
        """A costly method (ig: 32 backward passes a step): the current step's row alone first,
        then, once no row is being computed, every step's (the matrix, the other steps' rows), so
        the two never compete for the cores and the row comes after one step's work. The matrix
        view asks for every step at once. The screen's thread never waits, whatever the model."""
        row = session.step_attribution_wanted() if session.view_mode != "attribution" else None
        if row is not None:
            self._attribute(row)
        if not session.steps_asked and (job := session.attribution_wanted()) is not None:
            self._attribute(job)

    @work(thread=True, group="attribution", exit_on_error=False)
    def _attribute(self, job) -> None:
        self.post_message(AttributionReady(job, job.run()))

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
            session.attributions_asked.clear()  # a later key may try again
            session.steps_asked.clear()
            session.attribution_method = None
            if session.view_mode == "attribution":
                session.set_view("grid")
        self.notify(f"cannot attribute: {error}", severity="error", markup=False, timeout=10)
